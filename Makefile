# idem — build, check and test entry points.
#
# Everything builds in the release profile, so that tests, clippy, the binaries and the
# jepsen harness share one compilation. The target directory lives outside the clone when
# /var/cache is writable, so fresh clones (CI) reuse earlier builds on the same machine.

CARGO_TARGET_DIR ?= $(shell [ -w /var/cache ] && echo /var/cache/idem-target || echo $(CURDIR)/target)
export CARGO_TARGET_DIR
CARGO ?= cargo

.PHONY: verify bootstrap fmt-check clippy test jepsen jepsen-matrix fmt run bench help

help: ## Show the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

verify: bootstrap fmt-check clippy test python-test jepsen ## Everything CI checks: fmt, clippy -D warnings, all tests, the Python client's tests, a short jepsen rotation. Edits nothing.

bootstrap: ## Install missing system packages (RocksDB, libclang, netns tools).
	@scripts/bootstrap.sh

fmt-check: ## Fail if any file is not rustfmt-formatted.
	$(CARGO) fmt --all -- --check

clippy: bootstrap ## Lint every crate and target, warnings are errors.
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

test: bootstrap ## Run every test of the workspace.
	$(CARGO) test --release --workspace

jepsen: bootstrap ## A short fault-injection rotation: 2 runs of 30 s, nemeses and workload drawn from a printed seed (JEPSEN_SEED=S JEPSEN_RUNS=1 reruns one), < 4 min; needs root.
	jepsen/ci.sh

jepsen-matrix: bootstrap ## Every nemesis (alone and all together) × workload × {3, 5} nodes × 3 seeds, 60 s each (~4 h; narrow with JEPSEN_MATRIX_NEMESES/_WORKLOADS/_NODES/_SEEDS/_TIME_LIMIT): summary.md, summary.json, matrix.png under jepsen/store/matrix-<time>/; needs root.
	jepsen/matrix.sh

regions: bootstrap ## The multi-region scenario (5 nodes, 3 emulated regions; figures and checks, ~1 min; needs root).
	jepsen/regions.sh

fmt: ## Format the workspace.
	$(CARGO) fmt --all

run: bootstrap ## Start a dev node with data under ./data.
	$(CARGO) run --release --bin idemd -- --auth off

.PHONY: python-test
python-test: ## The Python client's tests (clients/python) against real idemd processes (< 2 min).
	@scripts/bootstrap.sh --python
	@# --tests: the dev-dependencies' features (idem-core/testing, …) as `make test` resolves
	@# them, so after `make test` the binaries are not compiled again with other features.
	$(CARGO) build --release --workspace --bins --tests
	clients/python/scripts/test.sh

bench: ## idem (the release build, see release) vs etcd (3 nodes each) and a single durable PostgreSQL, side by side (< 10 min once built; BENCH_BUILD=dev measures the development build; BENCH_POSTGRES=0 skips Postgres; installs etcd-server and postgresql when missing): scripts/bench/compare.sh.
	@scripts/bootstrap.sh --bench
	scripts/bench/compare.sh

.PHONY: release release-check
release: bootstrap ## The release binaries: idemd, idemctl, idem-bench with RocksDB compiled without assertions (NDEBUG), in their own target directory (scripts/release.sh; ~15 min of C++ the first time).
	scripts/release.sh build

release-check: bootstrap ## Every test on the release build, then a live cluster switched from the development build to it and one node rolled back (scripts/release.sh check; ~40 min the first time).
	scripts/release.sh check

.PHONY: upgrade-test
upgrade-test: bootstrap ## Rolling upgrade under load from the previous release (UPGRADE_FROM=<commit>, default a61c250) to this tree, and a rollback of one node (scripts/upgrade-test.sh; the old build is cached under /var/cache, ~10 min of CPU the first time, then ~2 min).
	scripts/upgrade-test.sh

.PHONY: image compose-test deploy-check
image: ## The container image idem:<version> from HEAD (deploy/docker/build.sh; makes its bases when no registry answers; ~14 min of both cores at nice 19).
	@scripts/bootstrap.sh --deploy
	deploy/docker/build.sh

compose-test: ## The image in containers: 5 nodes in 3 regions on Docker Compose (session, leader kill, restart, down/up) and the Kubernetes pods' start script (~3 min; needs make image).
	@scripts/bootstrap.sh --deploy
	deploy/compose/test.sh
	deploy/k8s/start-test.sh

deploy-check: ## Offline checks of deploy/: Kubernetes manifests against the schemas, systemd unit, compose file and certificates, alert rules (promtool) and the dashboard's metrics against a dev node on loopback (~10 s).
	@scripts/bootstrap.sh --deploy
	deploy/k8s/check.sh
	deploy/systemd/check.sh
	deploy/observability/check.sh
	docker-compose -f deploy/compose/docker-compose.yml config -q && echo "compose: ok: docker-compose.yml is valid"
	dir=$$(mktemp -d) && deploy/compose/certs.sh "$$dir/certs"; status=$$?; rm -rf "$$dir"; exit $$status
