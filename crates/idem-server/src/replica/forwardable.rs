//! Which commands a follower may forward to the leader, and so which ones the leader runs
//! when they arrive through `Forward.Propose`.
//!
//! A follower forwards a command only on behalf of a client it served (and, with
//! authentication on, authorised): the record commands of the Idempotency service, the
//! record repairs of the Admin service (`Reconcile`, `PurgeSubject`) and the placement
//! changes of the Admin service (cluster changes, admitting or releasing a tenant,
//! confirming a new home). Everything else a leader only proposes itself: the expiry
//! sweep's `Expire`, a new group's `Init`, and the failover bookkeeping
//! (`EnterFailover`/`EndFailover`, stamped with the leader's own id). Those are never sent,
//! and refused when they arrive, so a caller on the Raft port cannot delete records early
//! or move a group in or out of failover.

use idem_core::placement::GroupChange;
use idem_core::Command;

/// Whether `command` may travel through `Forward.Propose`; `Err` names why not.
pub fn check(command: &Command) -> Result<(), &'static str> {
    match command {
        Command::Claim(_)
        | Command::Start(_)
        | Command::RecordExternalCall(_)
        | Command::Renew(_)
        | Command::Complete(_)
        | Command::Fail(_)
        | Command::Release(_)
        | Command::Cancel(_)
        | Command::Reconcile(_)
        | Command::PurgeSubject(_)
        | Command::Cluster(_) => Ok(()),
        Command::Group(
            GroupChange::Admit { .. }
            | GroupChange::Release { .. }
            | GroupChange::ConfirmHome { .. },
        ) => Ok(()),
        Command::Expire(_) => Err("Expire is proposed by the leader's own sweep only"),
        Command::Group(GroupChange::Init { .. }) => {
            Err("a group's Init is proposed by its own first leader only")
        }
        Command::Group(GroupChange::EnterFailover { .. } | GroupChange::EndFailover { .. }) => {
            Err("failover changes are proposed by the group's leader only")
        }
    }
}

#[cfg(test)]
mod tests {
    use idem_core::command::Expire;
    use idem_core::placement::{ClusterChange, Mode};

    use super::*;

    #[test]
    fn only_client_commands_travel() {
        assert!(check(&Command::Expire(Expire { limit: 10 })).is_err());
        let init = GroupChange::Init {
            region: "r1".into(),
        };
        assert!(check(&Command::Group(init)).is_err());
        let enter = GroupChange::EnterFailover {
            leader_id: 2,
            leader_region: "r2".into(),
        };
        assert!(check(&Command::Group(enter)).is_err());
        let end = GroupChange::EndFailover { leader_id: 2 };
        assert!(check(&Command::Group(end)).is_err());

        let admit = GroupChange::Admit {
            tenant: "acme".into(),
        };
        assert!(check(&Command::Group(admit)).is_ok());
        let mode = ClusterChange::SetMode(Mode::RegionAffinity);
        assert!(check(&Command::Cluster(mode)).is_ok());
    }
}
