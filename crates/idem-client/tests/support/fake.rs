//! The fake nodes' side of the `Idempotency` service: a test implements [`Fake`] for the
//! rpcs it exercises, and every other rpc answers UNIMPLEMENTED (as a node that does not
//! know it would). [`Served`] turns a fake into the tonic service.

use std::future::{ready, Future};

use idem_proto::v1;
use idem_proto::v1::idempotency_server::{Idempotency, IdempotencyServer};
use tonic::{Request, Response, Status};

/// A fake's answer to one rpc.
pub type Answer<T> = Result<Response<T>, Status>;

fn unimplemented<T: Send>() -> impl Future<Output = Answer<T>> + Send {
    ready(Err(Status::unimplemented("not part of this fake")))
}

/// The rpcs of `idem.v1.Idempotency`, each UNIMPLEMENTED unless the fake answers it.
pub trait Fake: Send + Sync + 'static {
    fn claim(
        &self,
        _: Request<v1::ClaimRequest>,
    ) -> impl Future<Output = Answer<v1::ClaimResponse>> + Send {
        unimplemented()
    }

    fn start(
        &self,
        _: Request<v1::StartRequest>,
    ) -> impl Future<Output = Answer<v1::RecordResponse>> + Send {
        unimplemented()
    }

    fn record_external_call(
        &self,
        _: Request<v1::RecordExternalCallRequest>,
    ) -> impl Future<Output = Answer<v1::RecordResponse>> + Send {
        unimplemented()
    }

    fn renew(
        &self,
        _: Request<v1::RenewRequest>,
    ) -> impl Future<Output = Answer<v1::RecordResponse>> + Send {
        unimplemented()
    }

    fn complete(
        &self,
        _: Request<v1::CompleteRequest>,
    ) -> impl Future<Output = Answer<v1::RecordResponse>> + Send {
        unimplemented()
    }

    fn fail(
        &self,
        _: Request<v1::FailRequest>,
    ) -> impl Future<Output = Answer<v1::RecordResponse>> + Send {
        unimplemented()
    }

    fn release(
        &self,
        _: Request<v1::ReleaseRequest>,
    ) -> impl Future<Output = Answer<v1::RecordResponse>> + Send {
        unimplemented()
    }

    fn cancel(
        &self,
        _: Request<v1::CancelRequest>,
    ) -> impl Future<Output = Answer<v1::RecordResponse>> + Send {
        unimplemented()
    }

    fn get(
        &self,
        _: Request<v1::GetRequest>,
    ) -> impl Future<Output = Answer<v1::GetResponse>> + Send {
        unimplemented()
    }

    fn get_operation(
        &self,
        _: Request<v1::GetOperationRequest>,
    ) -> impl Future<Output = Answer<v1::GetResponse>> + Send {
        unimplemented()
    }

    fn wait(
        &self,
        _: Request<v1::WaitRequest>,
    ) -> impl Future<Output = Answer<v1::WaitResponse>> + Send {
        unimplemented()
    }

    fn batch(
        &self,
        _: Request<v1::BatchRequest>,
    ) -> impl Future<Output = Answer<v1::BatchResponse>> + Send {
        unimplemented()
    }
}

/// A fake as the `Idempotency` service.
pub struct Served<F>(pub F);

/// The tonic service of `fake`.
pub fn service<F: Fake>(fake: F) -> IdempotencyServer<Served<F>> {
    IdempotencyServer::new(Served(fake))
}

#[tonic::async_trait]
impl<F: Fake> Idempotency for Served<F> {
    async fn claim(&self, r: Request<v1::ClaimRequest>) -> Answer<v1::ClaimResponse> {
        self.0.claim(r).await
    }

    async fn start(&self, r: Request<v1::StartRequest>) -> Answer<v1::RecordResponse> {
        self.0.start(r).await
    }

    async fn record_external_call(
        &self,
        r: Request<v1::RecordExternalCallRequest>,
    ) -> Answer<v1::RecordResponse> {
        self.0.record_external_call(r).await
    }

    async fn renew(&self, r: Request<v1::RenewRequest>) -> Answer<v1::RecordResponse> {
        self.0.renew(r).await
    }

    async fn complete(&self, r: Request<v1::CompleteRequest>) -> Answer<v1::RecordResponse> {
        self.0.complete(r).await
    }

    async fn fail(&self, r: Request<v1::FailRequest>) -> Answer<v1::RecordResponse> {
        self.0.fail(r).await
    }

    async fn release(&self, r: Request<v1::ReleaseRequest>) -> Answer<v1::RecordResponse> {
        self.0.release(r).await
    }

    async fn cancel(&self, r: Request<v1::CancelRequest>) -> Answer<v1::RecordResponse> {
        self.0.cancel(r).await
    }

    async fn get(&self, r: Request<v1::GetRequest>) -> Answer<v1::GetResponse> {
        self.0.get(r).await
    }

    async fn get_operation(&self, r: Request<v1::GetOperationRequest>) -> Answer<v1::GetResponse> {
        self.0.get_operation(r).await
    }

    async fn wait(&self, r: Request<v1::WaitRequest>) -> Answer<v1::WaitResponse> {
        self.0.wait(r).await
    }

    async fn batch(&self, r: Request<v1::BatchRequest>) -> Answer<v1::BatchResponse> {
        self.0.batch(r).await
    }
}
