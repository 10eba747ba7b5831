//! `Admin.CreateToken`, `RevokeToken` and `ListTokens` on the [`Client`].

use idem_core::placement::TokenRole;
use idem_proto::v1 as pb;

use super::Client;
use crate::error::ClientError;
use crate::tokens::{role_to_proto, NewToken, TokenInfo};
use crate::transport::Kind;

impl Client {
    /// Admin of every tenant: creates a replicated token for `name` with `role` and
    /// `tenants` (`["*"]` for every tenant). The answer holds the secret, once.
    pub async fn create_token(
        &self,
        name: &str,
        role: TokenRole,
        tenants: &[String],
    ) -> Result<NewToken, ClientError> {
        let request = pb::CreateTokenRequest {
            name: name.to_owned(),
            role: role_to_proto(role).into(),
            tenants: tenants.to_vec(),
        };
        let created = self
            .admin(Kind::Write, |mut c| {
                let request = request.clone();
                async move { c.create_token(request).await }
            })
            .await?;
        Ok(NewToken {
            name: created.name,
            secret: created.token,
        })
    }

    /// Admin of every tenant: revokes the replicated token `name`; every node refuses it
    /// once it has applied the change.
    pub async fn revoke_token(&self, name: &str) -> Result<(), ClientError> {
        let request = pb::RevokeTokenRequest {
            name: name.to_owned(),
        };
        self.admin(Kind::Write, |mut c| {
            let request = request.clone();
            async move { c.revoke_token(request).await }
        })
        .await?;
        Ok(())
    }

    /// Admin of every tenant: the replicated tokens, by name (never a secret).
    pub async fn list_tokens(&self) -> Result<Vec<TokenInfo>, ClientError> {
        let listed = self
            .admin(Kind::Read, |mut c| async move {
                c.list_tokens(pb::ListTokensRequest {}).await
            })
            .await?;
        Ok(listed
            .tokens
            .into_iter()
            .filter_map(TokenInfo::from_proto)
            .collect())
    }
}
