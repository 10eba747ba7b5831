//! Generates the tonic client of etcd's KV service (`proto/etcd/kv.proto`, a trimmed copy of
//! etcd's own definitions) with the protoc shipped by `protoc-bin-vendored`, as idem-proto
//! does: the etcd backend speaks etcd's gRPC API like the idem backend speaks idem's, over the
//! same tonic stack, and the build needs no protoc on the machine. (The `etcd-client` crate
//! runs protoc from its own build script, which would need a system protoc.)

use std::env;
use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // The build script is single-threaded here; prost-build reads PROTOC.
    env::set_var("PROTOC", protoc);
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let proto = root.join("etcd").join("kv.proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    println!("cargo:rerun-if-changed=build.rs");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .compile_protos(&[proto], &[root])?;
    Ok(())
}
