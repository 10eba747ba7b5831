//! The owner's commands: start, call, renew, complete, fail, release, cancel.
//!
//! Each one carries the fence from the claim and prints the record as the command left it.
//! Re-running one after exit code 3 is safe: the server's worker commands are idempotent for
//! the same fence and content.

use idem_client::{Client, FailureKind};

use super::{error_summary, stored_result, target};
use crate::cli::{CallArgs, CompleteArgs, FailArgs, FencedArgs, RenewArgs};
use crate::error::CliError;
use crate::output::{record_doc, Doc};

/// `idemctl start`.
pub async fn start(client: &Client, args: FencedArgs) -> Result<Doc, CliError> {
    let target = target(&args.target)?;
    Ok(record_doc(&client.start(&target, args.fence).await?))
}

/// `idemctl call --calling | --confirmed REF`.
pub async fn call(client: &Client, args: CallArgs) -> Result<Doc, CliError> {
    let target = target(&args.fenced.target)?;
    let fence = args.fenced.fence;
    let record = match &args.confirmed {
        Some(remote_ref) => client.record_confirmed(&target, fence, remote_ref).await?,
        None => client.record_calling(&target, fence, None).await?,
    };
    Ok(record_doc(&record))
}

/// `idemctl renew`.
pub async fn renew(client: &Client, args: RenewArgs) -> Result<Doc, CliError> {
    let target = target(&args.fenced.target)?;
    let record = client.renew(&target, args.fenced.fence, args.lease).await?;
    Ok(record_doc(&record))
}

/// `idemctl complete`.
pub async fn complete(client: &Client, args: CompleteArgs) -> Result<Doc, CliError> {
    let target = target(&args.fenced.target)?;
    let result = stored_result(&args.result)?;
    let record = client.complete(&target, args.fenced.fence, &result).await?;
    Ok(record_doc(&record))
}

/// `idemctl fail --terminal | --retryable`.
pub async fn fail(client: &Client, args: FailArgs) -> Result<Doc, CliError> {
    let target = target(&args.fenced.target)?;
    let kind = if args.retryable {
        FailureKind::Retryable
    } else {
        FailureKind::Terminal
    };
    let error = error_summary(&args.error).unwrap_or_default();
    let record = client
        .fail(&target, args.fenced.fence, kind, &error)
        .await?;
    Ok(record_doc(&record))
}

/// `idemctl release`.
pub async fn release(client: &Client, args: FencedArgs) -> Result<Doc, CliError> {
    let target = target(&args.target)?;
    Ok(record_doc(&client.release(&target, args.fence).await?))
}

/// `idemctl cancel`.
pub async fn cancel(client: &Client, args: FencedArgs) -> Result<Doc, CliError> {
    let target = target(&args.target)?;
    Ok(record_doc(&client.cancel(&target, args.fence).await?))
}
