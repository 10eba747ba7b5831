//! `Admin.ListAudit` on the [`Client`]: one page of a group's audit log.

use idem_proto::v1::admin_client::AdminClient;

use super::Client;
use crate::audit::{AuditPage, AuditQuery};
use crate::error::ClientError;
use crate::transport::{Kind, Route};

impl Client {
    /// Admin or operator: one page of the audit log (an operator sees only the entries of
    /// its tenants). Continue with `query.from_seq = page.next_seq` until it is `None`.
    pub async fn list_audit(&self, query: &AuditQuery) -> Result<AuditPage, ClientError> {
        let request = query.to_proto();
        let response = self
            .transport
            .call(Kind::Read, Route::Default, self.timeout(), |channel| {
                let request = request.clone();
                async move { AdminClient::new(channel).list_audit(request).await }
            })
            .await?;
        Ok(AuditPage::from_proto(response))
    }
}
