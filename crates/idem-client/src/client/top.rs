//! `Admin.TopKeys` and `TopTenants` on the [`Client`].

use idem_proto::v1 as pb;

use super::Client;
use crate::error::ClientError;
use crate::top::{HotKey, TenantActivity, Top};
use crate::transport::Kind;

impl Client {
    /// Operator: the `limit` heaviest keys (0: the server's default, at most 100) of the
    /// claims the node reached answered recently, of `tenant` or, with `None`, of every
    /// tenant (which needs an operator of every tenant).
    pub async fn top_keys(
        &self,
        tenant: Option<&str>,
        limit: u32,
    ) -> Result<Top<HotKey>, ClientError> {
        let request = pb::TopKeysRequest {
            tenant: tenant.unwrap_or_default().to_owned(),
            limit,
        };
        let answer = self
            .admin(Kind::Read, |mut c| {
                let request = request.clone();
                async move { c.top_keys(request).await }
            })
            .await?;
        Ok(Top::<HotKey>::from_proto(answer))
    }

    /// Operator of every tenant: the `limit` tenants with the most claims the node reached
    /// answered recently, with their replays, mismatches and in-flight collisions.
    pub async fn top_tenants(&self, limit: u32) -> Result<Top<TenantActivity>, ClientError> {
        let answer = self
            .admin(Kind::Read, |mut c| async move {
                c.top_tenants(pb::TopTenantsRequest { limit }).await
            })
            .await?;
        Ok(Top::<TenantActivity>::from_proto(answer))
    }
}
