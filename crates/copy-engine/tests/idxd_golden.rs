//! The DSA formats against the kernel's own declaration: a C program built at test time with
//! the C compiler against the installed `<linux/idxd.h>` (Debian's `linux-libc-dev`) fills
//! `struct dsa_hw_desc` and `struct dsa_completion_record` with the same values as
//! `copy_engine::dsa::hw` and prints their bytes, sizes and the constants; they must agree
//! byte for byte.

use std::process::Command;

use copy_engine::dsa::hw::{
    self, BATCH_FLAGS, CompletionRecord, Descriptor, MEMMOVE_FLAGS, flag, opcode, status,
};

const PROGRAM: &str = r#"
#include <stdio.h>
#include <string.h>
#include <linux/idxd.h>

static void dump(const char *name, const void *p, size_t n) {
    printf("%s", name);
    for (size_t i = 0; i < n; i++) printf(" %02x", ((const unsigned char *)p)[i]);
    printf("\n");
}

int main(void) {
    struct dsa_hw_desc d;
    memset(&d, 0, sizeof d);
    d.flags = IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR | IDXD_OP_FLAG_CC;
    d.opcode = DSA_OPCODE_MEMMOVE;
    d.completion_addr = 0x7f0000001020ULL;
    d.src_addr = 0x7f1122334400ULL;
    d.dst_addr = 0x7f5566778800ULL;
    d.xfer_size = 1500;
    dump("memmove", &d, sizeof d);
    memset(&d, 0, sizeof d);
    d.flags = IDXD_OP_FLAG_CRAV | IDXD_OP_FLAG_RCR;
    d.opcode = DSA_OPCODE_BATCH;
    d.completion_addr = 0x7f0000002000ULL;
    d.desc_list_addr = 0x7f0000010000ULL;
    d.desc_count = 32;
    dump("batch", &d, sizeof d);
    struct dsa_completion_record r;
    memset(&r, 0, sizeof r);
    r.status = DSA_COMP_PAGE_FAULT_NOBOF | DSA_COMP_STATUS_WRITE;
    r.result = 1;
    r.bytes_completed = 4096;
    r.fault_addr = 0x7f5566779800ULL;
    r.invalid_flags = 0x123456;
    dump("record", &r, sizeof r);
    printf("sizes %zu %zu\n", sizeof(struct dsa_hw_desc), sizeof(struct dsa_completion_record));
    printf("flags %u %u %u %u %u %u\n", IDXD_OP_FLAG_FENCE, IDXD_OP_FLAG_BOF,
           IDXD_OP_FLAG_CRAV, IDXD_OP_FLAG_RCR, IDXD_OP_FLAG_RCI, IDXD_OP_FLAG_CC);
    printf("opcodes %u %u %u %u\n", DSA_OPCODE_NOOP, DSA_OPCODE_BATCH, DSA_OPCODE_DRAIN,
           DSA_OPCODE_MEMMOVE);
    printf("status %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u\n",
           DSA_COMP_NONE, DSA_COMP_SUCCESS, DSA_COMP_PAGE_FAULT_NOBOF, DSA_COMP_PAGE_FAULT_IR,
           DSA_COMP_BATCH_FAIL, DSA_COMP_BATCH_PAGE_FAULT, DSA_COMP_BAD_OPCODE,
           DSA_COMP_INVALID_FLAGS, DSA_COMP_NOZERO_RESERVE, DSA_COMP_XFER_ERANGE,
           DSA_COMP_DESC_CNT_ERANGE, DSA_COMP_OVERLAP_BUFFERS, DSA_COMP_DESCLIST_ALIGN,
           DSA_COMP_CRA_XLAT, DSA_COMP_CRA_ALIGN, DSA_COMP_HW_ERR1, DSA_COMP_TRANSLATION_FAIL,
           DSA_COMP_STATUS_MASK, DSA_COMP_STATUS_WRITE);
    return 0;
}
"#;

/// The program's output, or `None` (printed) where there is no C compiler or header; under
/// `CI` that is a failure.
fn c_says() -> Option<String> {
    let skip = |why: String| {
        assert!(std::env::var_os("CI").is_none(), "CI: {why}");
        eprintln!("SKIPPED: {why}");
        None
    };
    if !std::path::Path::new("/usr/include/linux/idxd.h").exists() {
        return skip("no <linux/idxd.h> (Debian's linux-libc-dev)".into());
    }
    let dir = std::env::temp_dir().join(format!("veclane-idxd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("golden.c"), dir.join("golden"));
    std::fs::write(&src, PROGRAM).unwrap();
    let built = match Command::new("cc").arg("-o").arg(&exe).arg(&src).output() {
        Ok(o) => o,
        Err(e) => return skip(format!("no C compiler (cc): {e}")),
    };
    assert!(
        built.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success());
    Some(String::from_utf8(out.stdout).unwrap())
}

fn line<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(name).map(|r| r.split_whitespace().collect()))
        .unwrap_or_else(|| panic!("no {name} line in:\n{out}"))
}

fn bytes(out: &str, name: &str) -> Vec<u8> {
    line(out, name)
        .iter()
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect()
}

fn numbers(out: &str, name: &str) -> Vec<u32> {
    line(out, name).iter().map(|n| n.parse().unwrap()).collect()
}

#[test]
fn formats_match_the_kernels_header() {
    let Some(out) = c_says() else { return };
    let m = Descriptor::memmove(
        MEMMOVE_FLAGS,
        0x7f00_0000_1020,
        0x7f11_2233_4400,
        0x7f55_6677_8800,
        1500,
    );
    assert_eq!(m.to_bytes().to_vec(), bytes(&out, "memmove "));
    let b = Descriptor::batch(BATCH_FLAGS, 0x7f00_0000_2000, 0x7f00_0001_0000, 32);
    assert_eq!(b.to_bytes().to_vec(), bytes(&out, "batch "));
    let r = CompletionRecord {
        status: status::PAGE_FAULT_NOBOF | status::WRITE_FAULT,
        result: 1,
        bytes_completed: 4096,
        fault_addr: 0x7f55_6677_9800,
        invalid_flags: 0x12_3456,
        ..CompletionRecord::default()
    };
    assert_eq!(r.to_bytes().to_vec(), bytes(&out, "record "));
    assert_eq!(
        numbers(&out, "sizes "),
        [
            size_of::<Descriptor>() as u32,
            size_of::<CompletionRecord>() as u32
        ]
    );
    assert_eq!(
        numbers(&out, "flags "),
        [
            flag::FENCE,
            flag::BOF,
            flag::CRAV,
            flag::RCR,
            flag::RCI,
            flag::CC
        ]
    );
    let ops: Vec<u32> = [opcode::NOOP, opcode::BATCH, opcode::DRAIN, opcode::MEMMOVE]
        .map(u32::from)
        .to_vec();
    assert_eq!(numbers(&out, "opcodes "), ops);
    let codes: Vec<u32> = [
        status::NONE,
        status::SUCCESS,
        status::PAGE_FAULT_NOBOF,
        status::PAGE_FAULT_IR,
        status::BATCH_FAIL,
        status::BATCH_PAGE_FAULT,
        status::BAD_OPCODE,
        status::INVALID_FLAGS,
        status::NOZERO_RESERVE,
        status::XFER_ERANGE,
        status::DESC_CNT_ERANGE,
        status::OVERLAP_BUFFERS,
        status::DESCLIST_ALIGN,
        status::CRA_XLAT,
        status::CRA_ALIGN,
        status::HW_ERR1,
        status::TRANSLATION_FAIL,
        status::MASK,
        status::WRITE_FAULT,
    ]
    .map(u32::from)
    .to_vec();
    assert_eq!(numbers(&out, "status "), codes);
    let _ = hw::BATCH_MEMMOVE_FLAGS;
}
