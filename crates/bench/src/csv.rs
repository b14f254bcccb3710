//! CSV files of results (RFC 4180).

use std::path::Path;

/// A header line and `rows` as RFC 4180 CSV: records end in CRLF, and a field holding a comma,
/// a double quote, CR or LF is enclosed in double quotes with its quotes doubled. Rows are
/// written as given: one with fewer or more fields than the header is not padded or cut.
pub fn to_csv(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    push_record(&mut out, header.iter().copied());
    for row in rows {
        push_record(&mut out, row.iter().map(String::as_str));
    }
    out
}

/// [`to_csv`], written to `path`.
pub fn write_csv(path: &Path, header: &[&str], rows: &[Vec<String>]) -> std::io::Result<()> {
    std::fs::write(path, to_csv(header, rows))
}

fn push_record<'a>(out: &mut String, fields: impl Iterator<Item = &'a str>) {
    for (i, field) in fields.enumerate() {
        if i > 0 {
            out.push(',');
        }
        if field.contains([',', '"', '\r', '\n']) {
            out.push('"');
            out.push_str(&field.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(field);
        }
    }
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::to_csv;

    fn row(fields: &[&str]) -> Vec<String> {
        fields.iter().map(|f| f.to_string()).collect()
    }

    #[test]
    fn plain_fields_are_not_quoted() {
        let csv = to_csv(&["dut", "size", "mpps"], &[row(&["veclane", "64", "3.25"])]);
        assert_eq!(csv, "dut,size,mpps\r\nveclane,64,3.25\r\n");
    }

    #[test]
    fn commas_quotes_and_line_breaks_are_quoted() {
        let csv = to_csv(
            &["a,b", "note"],
            &[
                row(&["say \"hi\"", "two\nlines"]),
                row(&["cr\r", " spaced "]),
                row(&["\"", ""]),
            ],
        );
        assert_eq!(
            csv,
            "\"a,b\",note\r\n\
             \"say \"\"hi\"\"\",\"two\nlines\"\r\n\
             \"cr\r\", spaced \r\n\
             \"\"\"\",\r\n"
        );
    }

    #[test]
    fn no_rows_gives_the_header_only() {
        assert_eq!(to_csv(&["x"], &[]), "x\r\n");
    }

    #[test]
    fn written_file_has_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.csv");
        let rows = [row(&["1", "a,b"])];
        super::write_csv(&path, &["n", "s"], &rows).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            to_csv(&["n", "s"], &rows)
        );
    }
}
