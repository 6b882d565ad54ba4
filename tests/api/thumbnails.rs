//! Thumbnails of image attachments, on both stores: a PNG, JPEG, GIF or WebP sent in a message
//! gets a thumbnail (at most 320 pixels a side, its aspect kept) and its own size on the
//! attachment shortly after the send, served with the file's membership check; a decompression
//! bomb (a huge size in a small file) and bytes of another type than declared get none, and
//! the message reads as before; deleting the message deletes the thumbnail too.

use std::io::Cursor;
use std::time::Duration;

use image::{DynamicImage, ImageFormat};
use reqwest::StatusCode;
use serde_json::Value;

use crate::attachments::{download, objects_under, send_with, uploaded};
use crate::helpers::messages::{delete_message, get_message};
use crate::helpers::{Backend, TestApp, backend_tests, spawn_app};

backend_tests!(
    each_image_type_gets_a_thumbnail_and_its_size_for_members_only,
    a_decompression_bomb_or_a_disguised_file_gets_no_thumbnail,
    deleting_the_message_deletes_its_thumbnails,
);

/// A `width` × `height` picture with something in it, encoded as `format`.
fn picture(width: u32, height: u32, format: ImageFormat, alpha: bool) -> Vec<u8> {
    let rgba = image::RgbaImage::from_fn(width, height, |x, y| {
        image::Rgba([
            (x % 256) as u8,
            (y % 256) as u8,
            128,
            if alpha { (x % 200) as u8 } else { 255 },
        ])
    });
    let image = match alpha {
        true => DynamicImage::ImageRgba8(rgba),
        false => DynamicImage::ImageRgb8(DynamicImage::ImageRgba8(rgba).to_rgb8()),
    };
    let mut out = Cursor::new(Vec::new());
    image.write_to(&mut out, format).unwrap();
    out.into_inner()
}

/// A PNG whose header says `width` × `height` of `color_type` around one tiny compressed row:
/// what a decompression bomb looks like before its pixels are inflated.
fn bomb(width: u32, height: u32, color_type: u8) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc.finalize().to_be_bytes());
    }
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    header.extend_from_slice(&[8, color_type, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &header);
    // A zlib stream of a few zero bytes (stored block): the rows a bomb would inflate.
    chunk(
        &mut png,
        b"IDAT",
        &[
            0x78, 0x01, 0x01, 0x04, 0x00, 0xfb, 0xff, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0x01,
        ],
    );
    chunk(&mut png, b"IEND", &[]);
    png
}

/// The message `id` as `user` reads it once every attachment in `ready` has its `image`
/// (within 20 s).
async fn when_thumbnailed(app: &TestApp, user: &str, room: &str, id: &str, ready: &[&str]) -> Value {
    for _ in 0..200 {
        let read = get_message(app, user, room, id).await;
        assert_eq!(read.status, StatusCode::OK, "{}", read.body);
        let files = read.body["attachments"].as_array().cloned().unwrap_or_default();
        let done = ready
            .iter()
            .all(|want| files.iter().any(|f| f["id"] == *want && f["image"].is_object()));
        if done {
            return read.body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no thumbnail for {ready:?} within 20 s");
}

async fn each_image_type_gets_a_thumbnail_and_its_size_for_members_only(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    app.join("bob", &room).await;
    let cases = [
        (
            "wide.png",
            "image/png",
            picture(800, 600, ImageFormat::Png, true),
            (800, 600),
        ),
        (
            "tall.jpg",
            "image/jpeg",
            picture(300, 900, ImageFormat::Jpeg, false),
            (300, 900),
        ),
        (
            "square.gif",
            "image/gif",
            picture(500, 500, ImageFormat::Gif, false),
            (500, 500),
        ),
        (
            "small.webp",
            "image/webp",
            picture(100, 50, ImageFormat::WebP, false),
            (100, 50),
        ),
    ];
    let mut ids = Vec::new();
    for (name, mime, bytes, _) in &cases {
        ids.push(uploaded(&app, "alice", &room, name, mime, bytes).await);
    }
    let named: Vec<&str> = ids.iter().map(String::as_str).collect();
    let sent = send_with(&app, "alice", &room, &named).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    let message = when_thumbnailed(&app, "bob", &room, sent.body["id"].as_str().unwrap(), &named).await;
    for ((name, _, _, (width, height)), id) in cases.iter().zip(&ids) {
        let file = message["attachments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id.as_str())
            .unwrap();
        let image = &file["image"];
        assert_eq!(
            (image["width"].as_u64(), image["height"].as_u64()),
            (Some(u64::from(*width)), Some(u64::from(*height))),
            "{name}: {file}"
        );
        let url = image["thumbnailUrl"].as_str().unwrap();
        assert_eq!(url, format!("/api/rooms/{room}/attachments/{id}/thumbnail"));
        let (status, stored) = download(&app, "bob", url).await;
        assert_eq!(status, StatusCode::FOUND, "{name}");
        let stored = stored.unwrap();
        assert_eq!(stored.status(), StatusCode::OK, "{name}");
        let thumb = image::load_from_memory(&stored.bytes().await.unwrap()).unwrap();
        let (w, h) = (thumb.width(), thumb.height());
        let scale = f64::from(*width.max(height)) / 320.0;
        let expected = match scale > 1.0 {
            true => (
                (f64::from(*width) / scale).round() as u32,
                (f64::from(*height) / scale).round() as u32,
            ),
            false => (*width, *height),
        };
        assert!(w.max(h) <= 320, "{name}: {w}x{h}");
        assert!(
            w.abs_diff(expected.0) <= 1 && h.abs_diff(expected.1) <= 1,
            "{name}: {w}x{h}, expected {expected:?}"
        );
        let (status, _) = download(&app, "mallory", url).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "a non-member: {name}");
    }
}

async fn a_decompression_bomb_or_a_disguised_file_gets_no_thumbnail(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    // Over the largest side; within it but over the memory one decode may take; a PNG declared
    // (and stored) as a JPEG; then a real image, whose thumbnail is made after theirs.
    let wide = uploaded(
        &app,
        "alice",
        &room,
        "wide.png",
        "image/png",
        &bomb(100_000, 100_000, 0),
    )
    .await;
    let heavy = uploaded(&app, "alice", &room, "heavy.png", "image/png", &bomb(11_000, 11_000, 6)).await;
    let png_bytes = picture(64, 64, ImageFormat::Png, false);
    let disguised = uploaded(&app, "alice", &room, "photo.jpg", "image/jpeg", &png_bytes).await;
    let real = uploaded(&app, "alice", &room, "real.png", "image/png", &png_bytes).await;
    let sent = send_with(&app, "alice", &room, &[&wide, &heavy, &disguised, &real]).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    let message = when_thumbnailed(&app, "alice", &room, sent.body["id"].as_str().unwrap(), &[&real]).await;
    for refused in [&wide, &heavy, &disguised] {
        let file = message["attachments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == refused.as_str())
            .unwrap();
        assert!(file.get("image").is_none(), "{file}");
        let (status, _) = download(
            &app,
            "alice",
            &format!("/api/rooms/{room}/attachments/{refused}/thumbnail"),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // The file itself is there as it was.
        let (status, _) = download(&app, "alice", &format!("/api/rooms/{room}/attachments/{refused}")).await;
        assert_eq!(status, StatusCode::FOUND);
    }
}

async fn deleting_the_message_deletes_its_thumbnails(backend: Backend) {
    let app = spawn_app(&backend);
    let room = app.create_room("alice").await;
    let id = uploaded(
        &app,
        "alice",
        &room,
        "a.png",
        "image/png",
        &picture(400, 400, ImageFormat::Png, false),
    )
    .await;
    let sent = send_with(&app, "alice", &room, &[&id]).await;
    let message = sent.body["id"].as_str().unwrap();
    when_thumbnailed(&app, "alice", &room, message, &[&id]).await;
    let objects = objects_under(&backend, &format!("{room}/")).await;
    assert_eq!(objects.len(), 2, "the file and its thumbnail: {objects:?}");
    let deleted = delete_message(&app, "alice", &room, message).await;
    assert!(deleted.status.is_success(), "{}", deleted.body);
    assert_eq!(objects_under(&backend, &format!("{room}/")).await, Vec::<String>::new());
}
