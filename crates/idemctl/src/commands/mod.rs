//! Command execution: each command turns its arguments into one SDK call and the answer into
//! a [`Doc`]; printing is [`crate::output`]'s job.
//!
//! The helpers here convert the shared argument structs (scope, key, result, error) into
//! idem-core types once, so validation errors read the same for every command.

mod admin;
mod audit;
mod auth;
mod cert;
mod claim;
mod cluster;
mod op;
mod read;
pub(crate) mod reconcile;
mod regions;
mod snapshot;
pub(crate) mod top;
mod worker;

use idem_client::{Client, ClientError, ClientOptions, RetryPolicy, Target, TlsOptions};
use idem_core::{ErrorSummary, IdempotencyKey, OperationId, RecordKey, Scope, StoredResult};

use crate::cli::{
    AuditCommand, AuthCommand, Cli, ClusterCommand, Command, ErrorArgs, FailoverCommand, KeyArgs,
    LeaderCommand, MemberCommand, OpCommand, RegionCommand, ResultArgs, SnapshotCommand,
    TenantCommand,
};
use crate::error::CliError;
use crate::output::Doc;

/// Runs the parsed command line against the cluster.
pub async fn run(cli: Cli) -> Result<Doc, CliError> {
    if let Command::Cert(command) = &cli.command {
        return cert::run(command);
    }
    if let Command::Auth(AuthCommand::Token(command)) = &cli.command {
        return match auth::file_command(command) {
            Some(done) => done,
            None => auth::run(&connect(&cli)?, command).await,
        };
    }
    if let Command::Snapshot(SnapshotCommand::Restore(args)) = &cli.command {
        return snapshot::restore(args);
    }
    let client = connect(&cli)?;
    match cli.command {
        Command::Claim(args) => claim::claim(&client, args).await,
        Command::Start(args) => worker::start(&client, args).await,
        Command::Call(args) => worker::call(&client, args).await,
        Command::Renew(args) => worker::renew(&client, args).await,
        Command::Complete(args) => worker::complete(&client, args).await,
        Command::Fail(args) => worker::fail(&client, args).await,
        Command::Release(args) => worker::release(&client, args).await,
        Command::Cancel(args) => worker::cancel(&client, args).await,
        Command::Get(args) => read::get(&client, args).await,
        Command::Wait(args) => read::wait(&client, args).await,
        Command::Op(OpCommand::Show(args)) => read::show(&client, args).await,
        Command::Op(OpCommand::List(args)) => op::list(&client, args).await,
        Command::Op(OpCommand::Reconcile(args)) => op::reconcile(&client, args).await,
        Command::Reconcile(reconcile::ReconcileCommand::Run(args)) => {
            reconcile::run(client, args, cli.write_out).await
        }
        Command::Top(command) => top::run(&client, command).await,
        Command::Purge(args) => admin::purge(&client, args).await,
        Command::Snapshot(SnapshotCommand::Save(args)) => snapshot::save(&client, &args.file).await,
        Command::Cert(_) | Command::Auth(_) | Command::Snapshot(SnapshotCommand::Restore(_)) => {
            unreachable!("answered above, without a connection")
        }
        Command::Status => admin::status(&client).await,
        Command::Audit(AuditCommand::List(args)) => audit::list(&client, args).await,
        Command::Member(MemberCommand::List) => cluster::list(&client).await,
        Command::Member(MemberCommand::Add(args)) => cluster::add(&client, args).await,
        Command::Member(MemberCommand::Promote(args)) => cluster::promote(&client, args.id).await,
        Command::Member(MemberCommand::Remove(args)) => cluster::remove(&client, args.id).await,
        Command::Leader(LeaderCommand::Transfer(args)) => cluster::transfer(&client, args).await,
        Command::Cluster(ClusterCommand::Status) => cluster::status(&client).await,
        Command::Cluster(ClusterCommand::Config) => regions::config(&client).await,
        Command::Cluster(ClusterCommand::Mode(args)) => regions::mode(&client, args).await,
        Command::Region(RegionCommand::Add(args)) => regions::add(&client, args).await,
        Command::Tenant(TenantCommand::Bind(args)) => regions::bind(&client, args).await,
        Command::Tenant(TenantCommand::Unbind(args)) => regions::unbind(&client, args).await,
        Command::Tenant(TenantCommand::List) => regions::tenants(&client).await,
        Command::Failover(FailoverCommand::Status) => regions::failover_status(&client).await,
        Command::Failover(FailoverCommand::Confirm(args)) => regions::confirm(&client, args).await,
    }
}

/// The client for the global options.
fn connect(cli: &Cli) -> Result<Client, CliError> {
    let options = ClientOptions {
        request_timeout: cli.request_timeout,
        retry: RetryPolicy {
            max_attempts: cli.max_attempts.max(1),
            ..RetryPolicy::default()
        },
        tls: tls_options(cli),
        token: cli
            .security
            .token
            .clone()
            .map(idem_client::BearerToken::new),
        ..ClientOptions::default()
    };
    let endpoints = cli.endpoints.clone();
    Ok(match cli.command.audit_reason() {
        Some(reason) => Client::connect_audited(endpoints, options, reason)?,
        None => Client::connect(endpoints, options)?,
    })
}

/// TLS when a CA is given (`--cacert`); a client certificate with `--cert`/`--key`.
fn tls_options(cli: &Cli) -> Option<TlsOptions> {
    let security = &cli.security;
    let ca = security.cacert.clone()?;
    Some(TlsOptions {
        ca: Some(ca),
        cert: security.cert.clone(),
        key: security.key.clone(),
        server_name: security.server_name.clone(),
    })
}

/// The validated record identity of the scope and key flags.
pub(crate) fn target(args: &KeyArgs) -> Result<Target, CliError> {
    let s = &args.scope;
    let scope = Scope::new(&*s.tenant, &*s.environment, &*s.actor, &*s.endpoint)
        .map_err(ClientError::from)?;
    let key = IdempotencyKey::new(&*args.key).map_err(ClientError::from)?;
    Ok(RecordKey::new(scope, key))
}

/// A validated operation id.
pub(crate) fn operation_id(text: &str) -> Result<OperationId, CliError> {
    Ok(text.trim().parse().map_err(ClientError::from)?)
}

/// The result of the result flags (`--status` is required here).
pub(crate) fn stored_result(args: &ResultArgs) -> Result<StoredResult, CliError> {
    let status_code = args
        .status
        .ok_or_else(|| CliError::Usage("--status is required for a result".into()))?;
    Ok(StoredResult {
        status_code,
        resource_id: args.resource_id.clone(),
        resource_version: args.resource_version.clone(),
        fields: args.fields.iter().cloned().collect(),
        purged: false,
        body: None,
    })
}

/// The error summary of the error flags; `None` when neither `--error` nor `--code` is given.
pub(crate) fn error_summary(args: &ErrorArgs) -> Option<ErrorSummary> {
    if args.error.is_none() && args.code.is_none() {
        return None;
    }
    Some(ErrorSummary {
        code: args.code.clone().unwrap_or_else(|| "error".to_owned()),
        message: args.error.clone().unwrap_or_default(),
    })
}

/// The operator named in audit entries: the flag, else `$USER`, else `idemctl`.
pub(crate) fn operator(flag: Option<String>) -> String {
    flag.or_else(|| std::env::var("USER").ok())
        .filter(|o| !o.is_empty())
        .unwrap_or_else(|| "idemctl".to_owned())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn key_args(key: &str, endpoint: &str) -> KeyArgs {
        let cli = Cli::try_parse_from([
            "idemctl",
            "get",
            "--tenant",
            "acme",
            "--env",
            "prod",
            "--actor",
            "u",
            "--endpoint",
            endpoint,
            "--key",
            key,
        ])
        .unwrap();
        match cli.command {
            Command::Get(args) => args,
            _ => unreachable!(),
        }
    }

    #[test]
    fn invalid_scope_and_key_are_usage_errors_with_reasons() {
        assert!(target(&key_args("k1", "POST /v1/charges")).is_ok());
        let err = target(&key_args("bad key", "POST /v1/charges")).unwrap_err();
        assert_eq!((err.reason(), err.exit_code()), ("INVALID_KEY", 2));
        let err = target(&key_args("k1", "post /x")).unwrap_err();
        assert_eq!((err.reason(), err.exit_code()), ("INVALID_SCOPE", 2));
        let err = operation_id("nope").unwrap_err();
        assert_eq!(err.reason(), "INVALID_ARGUMENT");
    }

    #[test]
    fn results_and_errors_from_flags() {
        let result = stored_result(&ResultArgs {
            status: Some(201),
            resource_id: "ch_1".into(),
            resource_version: String::new(),
            fields: vec![("b".into(), "2".into()), ("a".into(), "1".into())],
        })
        .unwrap();
        assert_eq!(result.status_code, 201);
        assert_eq!(result.fields.keys().collect::<Vec<_>>(), ["a", "b"]);
        let none = ErrorArgs {
            error: None,
            code: None,
        };
        assert_eq!(error_summary(&none), None);
        let some = ErrorArgs {
            error: Some("boom".into()),
            code: None,
        };
        assert_eq!(error_summary(&some).unwrap().code, "error");
        assert_eq!(operator(Some("alice".into())), "alice");
    }
}
