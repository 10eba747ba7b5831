//! Generates the tonic/prost code of the public API (`idem.v1`) and its file
//! descriptor set, and of the internal node-to-node Raft transport (`idem.raft.v1`, no
//! descriptor set: it is not part of the public API), with the protoc binary shipped by
//! `protoc-bin-vendored`: builds never depend on (or silently change with) a protoc
//! installed on the machine.

use std::env;
use std::error::Error;
use std::path::PathBuf;

/// The public API files, relative to the workspace's `proto/` directory.
const PROTOS: &[&str] = &[
    "idem/v1/idempotency.proto",
    "idem/v1/admin.proto",
    "idem/v1/backup.proto",
];

/// The node-to-node Raft transport (package `idem.raft.v1`), compiled separately so the
/// public descriptor set stays public-only.
const RAFT_PROTO: &str = "idem/v1/raft.proto";

fn main() -> Result<(), Box<dyn Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // The build script is single-threaded here; prost-build reads PROTOC.
    env::set_var("PROTOC", protoc);

    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    let proto_root = manifest_dir.join("..").join("..").join("proto");
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);

    let protos: Vec<PathBuf> = PROTOS.iter().map(|p| proto_root.join(p)).collect();
    let raft_proto = proto_root.join(RAFT_PROTO);
    for proto in protos.iter().chain([&raft_proto]) {
        println!("cargo:rerun-if-changed={}", proto.display());
    }
    println!("cargo:rerun-if-changed=build.rs");

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .file_descriptor_set_path(out_dir.join("idem_v1_descriptor.bin"))
        .compile_protos(&protos, std::slice::from_ref(&proto_root))?;

    // Snapshot chunks and payloads as `Bytes`: chunks are zero-copy slices of the snapshot.
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .bytes(".idem.raft.v1")
        .compile_protos(&[raft_proto], &[proto_root])?;
    Ok(())
}
