//! Push fan-out: one message in a room of 1,000 subscribers, from the send until the push
//! service in this bench has accepted all 1,000 pushes, next to the raw cost of the crypto
//! alone (what `PushSender::prepare` does per push: aes128gcm encryption, with the VAPID token
//! reused per push service; nothing sent), measured in the same run so the ratio is comparable on a noisy machine. Embedded store. Not a test:
//!
//! ```text
//! cargo bench -p tabletalk-functions --bench push_fanout
//! ```

// The binary's own composition root: the bench runs the service as the server assembles it.
#[path = "../../functions/src/compose.rs"]
mod compose;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use tabletalk::adapters::push::{Push, PushSender};
use tabletalk::auth::Principal;
use tabletalk::config::Settings;
use tabletalk::ids::UserId;
use tabletalk::messages::send::NewMessage;
use tabletalk::rooms::NewRoom;
use tabletalk::subscriptions::{NewSubscription, PushKeys};

const SUBSCRIBERS: usize = 1000;
const MESSAGES: usize = 3;

fn principal(user: &str) -> Principal {
    Principal {
        user_id: UserId::parse(user).unwrap(),
        name: user.to_owned(),
    }
}

/// A browser's subscription keys.
fn keys() -> PushKeys {
    let secret = p256::SecretKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
    PushKeys {
        p256dh: B64.encode(secret.public_key().to_encoded_point(false).as_bytes()),
        auth: B64.encode(rand::random::<[u8; 16]>()),
    }
}

/// The push service: accepts every push (201) and counts them.
async fn push_service() -> (Arc<AtomicUsize>, String) {
    let count = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&count);
    let app = axum::Router::new().route(
        "/push/{device}",
        axum::routing::post(move || {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::Relaxed);
                axum::http::StatusCode::CREATED
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (count, base)
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let dir = std::env::temp_dir().join(format!("tt-fanout-{}", uuid::Uuid::new_v4()));
    let (vapid, _) = tabletalk::adapters::push::generate_vapid_key().unwrap();
    let values: HashMap<String, String> = [
        ("TABLETALK_DATA_DIR", dir.to_str().unwrap()),
        ("TABLETALK_SQLITE_SYNC", "normal"),
        ("TABLETALK_JWT_SECRET", "bench"),
        ("TABLETALK_VAPID_PRIVATE_KEY", vapid.as_str()),
        ("TABLETALK_PUSH_ALLOW_PRIVATE_ENDPOINTS", "true"),
        ("TABLETALK_HOUSEKEEPING_SECONDS", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let chat = compose::chat(&Settings::from_values(&values).unwrap()).await.unwrap();
    let (count, base) = push_service().await;

    let owner = principal("owner");
    let room = chat
        .rooms
        .create_room(
            &owner,
            NewRoom {
                name: "fan-out".into(),
                description: None,
                visibility: tabletalk::rooms::Visibility::Public,
            },
        )
        .await
        .unwrap();
    let room_id = tabletalk::ids::RoomId::parse(&room.id).unwrap();
    let setup = Instant::now();
    let mut subscriptions = Vec::new();
    for i in 0..SUBSCRIBERS {
        let user = principal(&format!("user{i}"));
        chat.rooms.join_room(&user, &room_id).await.unwrap();
        let subscription = chat
            .accounts
            .subscribe(
                &user,
                NewSubscription {
                    endpoint: format!("{base}/push/{i}"),
                    keys: keys(),
                    expiration_time: None,
                },
            )
            .await
            .unwrap();
        subscriptions.push(subscription);
    }
    println!(
        "setup: {SUBSCRIBERS} members with one subscription each in {:.1} s",
        setup.elapsed().as_secs_f64()
    );

    // Raw crypto: every push's encryption (the VAPID token is signed once per push service),
    // on one core, nothing sent.
    let sender = PushSender::new(&vapid, "mailto:bench@example.com").unwrap();
    let push = Push {
        payload: br#"{"roomId":"00000000-0000-0000-0000-000000000000","messageId":"2516062669865313804","senderName":"owner","preview":"a message of about this length, as previews go","mentioned":false}"#.to_vec(),
        ttl: 14400,
        urgency: web_push::Urgency::Normal,
        topic: Some("abcdefghijklmnopqrstuvwxyz012345".into()),
    };
    let crypto = Instant::now();
    for subscription in &subscriptions {
        sender.prepare(subscription, &push).unwrap();
    }
    let crypto_rate = SUBSCRIBERS as f64 / crypto.elapsed().as_secs_f64();
    println!("raw crypto (PushSender::prepare, one core): {crypto_rate:.0} pushes/s");

    // Fan-out: send, then wait for the push service to have them all.
    for round in 1..=MESSAGES {
        let before = count.load(Ordering::Relaxed);
        let started = Instant::now();
        chat.sending
            .send_message(&owner, &room_id, NewMessage::text(format!("<p>round {round}</p>")))
            .await
            .unwrap();
        while count.load(Ordering::Relaxed) < before + SUBSCRIBERS {
            if started.elapsed() > Duration::from_secs(120) {
                panic!("only {} pushes arrived", count.load(Ordering::Relaxed) - before);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let rate = SUBSCRIBERS as f64 / elapsed;
        println!(
            "message {round}: {SUBSCRIBERS} pushes in {:.0} ms = {rate:.0} pushes/s ({:.2} of raw crypto)",
            elapsed * 1000.0,
            rate / crypto_rate
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}
