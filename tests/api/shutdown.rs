//! Stopping the server: on SIGTERM it stops accepting, answers what it accepted, lets the
//! background work those requests started finish (publishing each event, pushing it), and
//! exits. Nothing it acknowledged is lost, and nothing waits in the outbox for a timer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{Backend, backend_tests, spawn_push_app, token};
use crate::push::{Device, start_service, subscribe};

backend_tests!(sigterm_during_a_send_load_loses_no_acknowledged_send_and_leaves_no_event_unpublished);

async fn sigterm_during_a_send_load_loses_no_acknowledged_send_and_leaves_no_event_unpublished(backend: Backend) {
    let mut app = spawn_push_app(&backend, &[]);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    // Every send pushes to bob through a push service that takes a while to answer, so pushes
    // are under way whenever the signal comes.
    let (service, addr) = start_service().await;
    *service.delay.lock().unwrap() = Duration::from_millis(400);
    subscribe(&app, "bob", &Device::new("phone", addr)).await;

    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let writers: Vec<_> = (0..6)
        .map(|writer| {
            let (http, base, room, acknowledged) =
                (app.http.clone(), app.base.clone(), room.clone(), acknowledged.clone());
            tokio::spawn(async move {
                for n in 0.. {
                    let sent = http
                        .request(Method::POST, format!("{base}/api/rooms/{room}/messages"))
                        .bearer_auth(token("alice"))
                        .json(&json!({ "text": format!("w{writer} n{n}"), "clientId": format!("w{writer}-n{n}") }))
                        .send()
                        .await;
                    // Refused or cut off once the server stops: the load ends there.
                    let Ok(sent) = sent else { return };
                    if sent.status() != StatusCode::CREATED {
                        return;
                    }
                    let Ok(body) = sent.json::<serde_json::Value>().await else {
                        return;
                    };
                    acknowledged
                        .lock()
                        .unwrap()
                        .push(body["id"].as_str().unwrap().to_owned());
                }
            })
        })
        .collect();
    // Under load, with pushes in flight.
    for _ in 0..200 {
        if acknowledged.lock().unwrap().len() >= 30 && !service.received.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let status = app.terminate().await;
    assert!(status.success(), "the server exits cleanly on SIGTERM: {status}");
    for writer in writers {
        writer.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 30, "the load ran: {} sends", acknowledged.len());

    // Before any restart: every event was published and pushed, none waits in the outbox.
    let chat = backend.chat().await;
    let room_id = tabletalk::ids::RoomId::parse(&room).unwrap();
    let waiting = chat.store().outbox.pending_events(&room_id).await.unwrap();
    let waiting: Vec<&str> = waiting.iter().map(|p| p.row_key.as_str()).collect();
    assert!(waiting.is_empty(), "events left unpublished: {waiting:?}");
    let (received, answered) = (
        service.received.lock().unwrap().len(),
        *service.answered.lock().unwrap(),
    );
    assert_eq!(received, answered, "every push the service got was waited for");

    // After a restart on the same store, every acknowledged send is there.
    let app = spawn_push_app(&backend, &[]);
    let stored: std::collections::HashSet<String> = app
        .read_all("bob", &room, "desc", 100)
        .await
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    let lost: Vec<&String> = acknowledged.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(lost.is_empty(), "acknowledged sends lost: {lost:?}");
}
