//! Thumbnails of uploaded images, made with the `image` crate. Decoding is what an uploaded
//! file can make expensive, so it is bounded from the header, before any pixel is read: the
//! decoder for the declared type only (the upload's stored type was checked against it; bytes
//! of another format fail to decode), a largest side and a pixel count that a decompression
//! bomb's header already exceeds. The pixel count is the bound that holds for every decoder:
//! the crate's allocation limit is not enforced inside all of them (a progressive JPEG's own
//! buffers, WebP's), so the memory a decode takes is a small multiple of
//! `MAX_IMAGE_PIXELS` × 4 bytes. A photo's EXIF orientation is applied, so the thumbnail and the
//! size recorded are the image as a browser shows it. The caller runs this off the async
//! threads (`spawn_blocking`), one at a time.

use std::io::Cursor;

use image::codecs::jpeg::JpegEncoder;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};
use tabletalk_domain::attachments::{MAX_DECODE_BYTES, MAX_IMAGE_EDGE, MAX_IMAGE_PIXELS, THUMBNAIL_EDGE};

/// A thumbnail, and the size of the image it was made of.
#[derive(Debug, Clone)]
pub struct Thumbnail {
    pub bytes: Vec<u8>,
    /// `image/png` for an image with transparency, else `image/jpeg`.
    pub mime: &'static str,
    /// The image's own width and height.
    pub width: u32,
    pub height: u32,
}

/// JPEG quality of a thumbnail without transparency.
const JPEG_QUALITY: u8 = 82;

/// The thumbnail of `bytes`, an image of type `mime`: scaled to fit [`THUMBNAIL_EDGE`] a side
/// (a smaller image keeps its size). Refused, saying why: a type that gets no thumbnail, an
/// image over the bounds, bytes that do not decode as the type.
pub fn make_thumbnail(bytes: &[u8], mime: &str) -> Result<Thumbnail, String> {
    let format = match mime {
        "image/png" => ImageFormat::Png,
        "image/jpeg" => ImageFormat::Jpeg,
        "image/gif" => ImageFormat::Gif,
        "image/webp" => ImageFormat::WebP,
        other => return Err(format!("{other} gets no thumbnail")),
    };
    let mut reader = ImageReader::new(Cursor::new(bytes));
    reader.set_format(format);
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_IMAGE_EDGE);
    limits.max_image_height = Some(MAX_IMAGE_EDGE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(|e| e.to_string())?;
    let (width, height) = decoder.dimensions();
    if u64::from(width) * u64::from(height) > MAX_IMAGE_PIXELS || decoder.total_bytes() > MAX_DECODE_BYTES {
        return Err(format!(
            "the image is {width} x {height}: over the limit of {MAX_IMAGE_PIXELS} pixels decoded"
        ));
    }
    let orientation = decoder.orientation().map_err(|e| e.to_string())?;
    let mut image = DynamicImage::from_decoder(decoder).map_err(|e| e.to_string())?;
    image.apply_orientation(orientation);
    let (width, height) = (image.width(), image.height());
    let small = match width.max(height) > THUMBNAIL_EDGE {
        true => image.thumbnail(THUMBNAIL_EDGE, THUMBNAIL_EDGE),
        false => image,
    };
    let mut out = Cursor::new(Vec::new());
    let mime = if small.color().has_alpha() {
        small.write_to(&mut out, ImageFormat::Png).map_err(|e| e.to_string())?;
        "image/png"
    } else {
        DynamicImage::ImageRgb8(small.to_rgb8())
            .write_with_encoder(JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY))
            .map_err(|e| e.to_string())?;
        "image/jpeg"
    };
    Ok(Thumbnail {
        bytes: out.into_inner(),
        mime,
        width,
        height,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(image: &DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        image.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    #[test]
    fn a_large_image_is_scaled_to_fit_and_a_small_one_kept() {
        let wide = DynamicImage::ImageRgb8(image::RgbImage::new(1000, 500));
        let made = make_thumbnail(&encoded(&wide, ImageFormat::Png), "image/png").unwrap();
        assert_eq!((made.width, made.height, made.mime), (1000, 500, "image/jpeg"));
        let thumb = image::load_from_memory(&made.bytes).unwrap();
        assert_eq!((thumb.width(), thumb.height()), (320, 160));
        let clear = DynamicImage::ImageRgba8(image::RgbaImage::new(40, 30));
        let made = make_thumbnail(&encoded(&clear, ImageFormat::Png), "image/png").unwrap();
        assert_eq!(made.mime, "image/png", "transparency is kept");
        assert_eq!(image::load_from_memory(&made.bytes).unwrap().width(), 40);
    }

    /// A PNG whose header says `width` × `height` RGBA, around one tiny compressed row.
    fn bomb(width: u32, height: u32) -> Vec<u8> {
        fn chunk(png: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
            let typed = [kind, data].concat();
            png.extend_from_slice(&(data.len() as u32).to_be_bytes());
            png.extend_from_slice(&typed);
            png.extend_from_slice(&crc32fast::hash(&typed).to_be_bytes());
        }
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        let header = [&width.to_be_bytes()[..], &height.to_be_bytes(), &[8, 6, 0, 0, 0]].concat();
        chunk(&mut png, b"IHDR", &header);
        chunk(
            &mut png,
            b"IDAT",
            &[0x78, 0x01, 0x01, 0x04, 0x00, 0xfb, 0xff, 0, 0, 0, 0, 0, 0, 0, 1],
        );
        chunk(&mut png, b"IEND", &[]);
        png
    }

    #[test]
    fn a_bomb_is_refused_by_its_header_before_any_pixel() {
        for (width, height) in [(100_000, 10), (11_000, 11_000)] {
            let refused = make_thumbnail(&bomb(width, height), "image/png").unwrap_err();
            assert!(refused.to_lowercase().contains("limit"), "{width}x{height}: {refused}");
        }
        let fits = make_thumbnail(&bomb(100, 100), "image/png").unwrap_err();
        assert!(!fits.to_lowercase().contains("limit"), "{fits}");
    }

    #[test]
    fn a_photos_exif_orientation_is_applied() {
        let jpeg = encoded(
            &DynamicImage::ImageRgb8(image::RgbImage::new(40, 20)),
            ImageFormat::Jpeg,
        );
        // An APP1 Exif segment after SOI: one IFD entry, Orientation (0x0112) = 6, "rotate 90°".
        let tiff: &[u8] = b"MM\0\x2a\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x06\0\0\0\0\0\0";
        let payload = [&b"Exif\0\0"[..], tiff].concat();
        let mut rotated = jpeg[..2].to_vec();
        rotated.extend_from_slice(&[0xff, 0xe1]);
        rotated.extend_from_slice(&((payload.len() + 2) as u16).to_be_bytes());
        rotated.extend_from_slice(&payload);
        rotated.extend_from_slice(&jpeg[2..]);
        let made = make_thumbnail(&rotated, "image/jpeg").unwrap();
        assert_eq!((made.width, made.height), (20, 40));
        assert_eq!(image::load_from_memory(&made.bytes).unwrap().width(), 20);
    }

    #[test]
    fn bytes_of_another_type_or_a_type_never_decoded_are_refused() {
        let png = encoded(&DynamicImage::ImageRgb8(image::RgbImage::new(8, 8)), ImageFormat::Png);
        assert!(make_thumbnail(&png, "image/jpeg").is_err());
        assert!(make_thumbnail(&png, "application/pdf").is_err());
        assert!(make_thumbnail(b"not an image", "image/png").is_err());
    }
}
