//! NumPy `.npy` arrays through the `npyz` crate: any float array (F16, F32,
//! F64, little- or big-endian, C order) read as F32 values with its shape,
//! and F32 arrays written whole (a temporary file renamed over the target).

use std::path::Path;

use npyz::WriterBuilder;

use super::HostIoError;

/// A dense row-major array of F32 values.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub shape: Vec<u64>,
    pub values: Vec<f32>,
}

/// The most elements an input or reference array may hold (a 64 MiB array
/// of F32: far above any model's pixels, patches or embedding).
const MAX_ELEMENTS: u64 = 16 << 20;

/// Reads a float array, refusing other element types, Fortran order,
/// non-finite values and arrays larger than any input.
pub fn read(path: &Path) -> Result<Array, HostIoError> {
    let bytes = std::fs::read(path)
        .map_err(|error| HostIoError::file(path, format!("cannot read: {error}")))?;
    let file = npyz::NpyFile::new(&bytes[..])
        .map_err(|error| HostIoError::file(path, format!("not a NumPy .npy file: {error}")))?;
    if file.order() == npyz::Order::Fortran {
        return Err(HostIoError::file(
            path,
            "the array is in Fortran (column-major) order; save it with np.ascontiguousarray",
        ));
    }
    let shape = file.shape().to_vec();
    let elements = shape
        .iter()
        .try_fold(1u64, |product, &extent| product.checked_mul(extent));
    match elements {
        Some(elements) if elements <= MAX_ELEMENTS => {}
        _ => {
            return Err(HostIoError::file(
                path,
                format!("shape {shape:?} holds more than {MAX_ELEMENTS} elements"),
            ));
        }
    }
    let type_string = match file.dtype() {
        npyz::DType::Plain(type_string) => type_string,
        other => {
            return Err(HostIoError::file(
                path,
                format!(
                    "elements of type {} are not floats; save the array as float32",
                    other.descr()
                ),
            ));
        }
    };
    let unreadable = |error: &dyn std::fmt::Display| {
        HostIoError::file(path, format!("cannot read the values: {error}"))
    };
    let values: Vec<f32> = match (type_string.type_char(), type_string.size_field()) {
        (npyz::TypeChar::Float, 2) => file
            .data::<half::f16>()
            .map_err(|error| unreadable(&error))?
            .map(|value| value.map(f32::from))
            .collect::<Result<_, _>>()
            .map_err(|error| unreadable(&error))?,
        (npyz::TypeChar::Float, 4) => file.into_vec::<f32>().map_err(|error| unreadable(&error))?,
        (npyz::TypeChar::Float, 8) => file
            .data::<f64>()
            .map_err(|error| unreadable(&error))?
            .map(|value| value.map(|value| value as f32))
            .collect::<Result<_, _>>()
            .map_err(|error| unreadable(&error))?,
        _ => {
            return Err(HostIoError::file(
                path,
                format!("elements of type {type_string} are not floats; save the array as float32"),
            ));
        }
    };
    if let Some(index) = values.iter().position(|value| !value.is_finite()) {
        return Err(HostIoError::file(
            path,
            format!(
                "element {index} is {} (every value must be finite)",
                values[index]
            ),
        ));
    }
    Ok(Array { shape, values })
}

/// The bytes of a little-endian F32 `.npy` file of `shape`.
pub fn encode(shape: &[u64], values: &[f32]) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut bytes)
        .begin_nd()
        .expect("writing into memory cannot fail");
    writer
        .extend(values.iter().copied())
        .expect("writing into memory cannot fail");
    writer.finish().expect("writing into memory cannot fail");
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_arrays_read_back() {
        let directory = std::env::temp_dir().join(format!("superstep-npy-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("array.npy");
        std::fs::write(&path, encode(&[2, 3], &[1.0, -2.5, 3.0, 0.0, 4.25, -1.0])).unwrap();
        let array = read(&path).unwrap();
        assert_eq!(array.shape, vec![2, 3]);
        assert_eq!(array.values, vec![1.0, -2.5, 3.0, 0.0, 4.25, -1.0]);
        std::fs::write(&path, b"not an array").unwrap();
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains("not a NumPy .npy file"), "{error}");
        std::fs::write(&path, encode(&[2], &[1.0, f32::NAN])).unwrap();
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains("element 1 is NaN"), "{error}");
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
