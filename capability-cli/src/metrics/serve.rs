//! The `/metrics` endpoint: HTTP/1.1 on the `--metrics` address, `GET /metrics` only.

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::Metrics;

/// Serves `metrics` on `listener` until the task is dropped. Each connection on a task of its
/// own; a request for anything but `GET /metrics` is answered 404 or 405.
pub async fn serve(listener: std::net::TcpListener, metrics: Arc<Metrics>) {
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
    {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("capability: the metrics endpoint cannot serve: {error}");
            return;
        }
    };
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(answer(&request, &metrics)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(request: &Request<Incoming>, metrics: &Metrics) -> Response<String> {
    let (status, body) = match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, metrics.render()),
        (_, "/metrics") => (
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET /metrics\n".to_owned(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "the metrics are at /metrics\n".to_owned(),
        ),
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let content_type = if status == StatusCode::OK {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}
