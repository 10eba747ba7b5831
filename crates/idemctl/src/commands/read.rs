//! Reads: `get`, `wait` and `op show`. Each prints the record and what a matching claim
//! would get now (`outcome`), without changing anything.

use idem_client::Client;

use super::{operation_id, target};
use crate::cli::{KeyArgs, ShowArgs, WaitArgs};
use crate::error::CliError;
use crate::output::{lookup_doc, Doc};

/// `idemctl get`.
pub async fn get(client: &Client, args: KeyArgs) -> Result<Doc, CliError> {
    let target = target(&args)?;
    Ok(lookup_doc(&client.get(&target).await?))
}

/// `idemctl wait`.
pub async fn wait(client: &Client, args: WaitArgs) -> Result<Doc, CliError> {
    let target = target(&args.target)?;
    Ok(lookup_doc(&client.wait(&target, args.timeout).await?))
}

/// `idemctl op show`.
pub async fn show(client: &Client, args: ShowArgs) -> Result<Doc, CliError> {
    let id = operation_id(&args.operation_id)?;
    Ok(lookup_doc(&client.get_operation(id).await?))
}
