//! A worker that dies after the downstream succeeded and before `Complete`: the payment
//! service's next attempt takes the record over, is told the stage the dead worker reached
//! (`REMOTE_CONFIRMED` here; `CALLING` after a provider timeout is walkthrough.rs, and a
//! HIGH-risk `CALLING` left to the reconciler is reconcile.rs and reconcile_cli.rs), finds
//! the charge at the provider instead of charging again, and completes with it.

use crate::common;

use std::time::Duration;

use common::{dying_worker, post, setup, target, Setup, LEASE};
use http::StatusCode;
use idem_client::idem_core::{Risk, Stage, State};
use payments::provider_client::ProviderClient;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_told_remote_confirmed_does_not_charge_twice() {
    let Setup {
        node: _node,
        provider,
        provider_base,
        idem,
        addr,
    } = setup().await;
    let psp = ProviderClient::new(provider_base, Duration::from_secs(5));

    // The first worker charged, recorded REMOTE_CONFIRMED, and died before Complete.
    let (operation, fence) = dying_worker(&idem, &psp, "order-confirmed", Risk::High, true).await;
    let charge = psp.find(&operation.to_string()).await.unwrap().unwrap();
    idem.record_confirmed(&target("order-confirmed"), fence, &charge.id)
        .await
        .unwrap();
    tokio::time::sleep(LEASE + Duration::from_millis(300)).await;

    // The retry, through the service: a takeover (even at HIGH risk, the outcome is known).
    let retry = post(
        addr,
        "order-confirmed",
        r#"{"amount":1000,"currency":"EUR"}"#,
    )
    .await;
    assert_eq!(retry.status, StatusCode::CREATED, "{:?}", retry.json);
    assert!(!retry.replayed, "taken over, not replayed");
    assert_eq!(retry.json["provider_ref"], charge.id.as_str());
    assert_eq!(retry.json["operation_id"], operation.to_string());
    assert_eq!(provider.charges_made(), 1, "no second charge");
    let record = idem.get(&target("order-confirmed")).await.unwrap().record;
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.previous_stage, Some(Stage::RemoteConfirmed));
    assert_eq!(record.attempts, 2);
}
