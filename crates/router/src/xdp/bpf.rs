//! The eBPF side of AF_XDP, with nothing but the `bpf()` system call: an `XSKMAP`, a six-instruction
//! XDP program that redirects every frame to the socket of the queue it arrived on, and a BPF link
//! that attaches it to an interface.
//!
//! Principles:
//! * **No toolchain, no libbpf.** The program is assembled here from its instruction encoding
//!   (`struct bpf_insn`: opcode byte, destination register in the low nibble and source register in
//!   the high nibble of the second byte, a 16-bit offset and a 32-bit immediate, little-endian on
//!   the machines we run on), so a fresh machine builds it with cargo alone.
//! * **Nothing stays attached.** The program is attached through a BPF link (`BPF_LINK_CREATE`,
//!   attach type `BPF_XDP`), never through netlink: the link lives exactly as long as its file
//!   descriptor, so when the process exits for any reason — `SIGKILL` included — the kernel closes
//!   the fd and detaches the program. A link also refuses to replace a program someone else
//!   attached (`EBUSY`), so two shapers cannot silently steal an interface from each other.
//! * **Frames never vanish in the program.** `bpf_redirect_map(map, queue, XDP_PASS)` returns the
//!   low bits of its flags (`XDP_PASS`) when the map has no socket for the queue, so a frame on a
//!   queue we did not bind goes up the kernel stack rather than being dropped.
//! * **Errors name the step.** Every failure says which command failed with which errno, and a
//!   program the verifier rejects comes back with the verifier's log.
//!
//! Sources: include/uapi/linux/bpf.h (commands, `union bpf_attr` layouts, map/program/attach type
//! numbers, helper numbers in `___BPF_FUNC_MAPPER`, `struct xdp_md`, `XDP_FLAGS_*` in
//! include/uapi/linux/if_link.h), Documentation/bpf/standardization/instruction-set.rst (encoding),
//! Documentation/networking/af_xdp.rst ("XSKMAP / BPF_MAP_TYPE_XSKMAP"), kernel/bpf/syscall.c
//! (`link_create`, the attr tail must be zero), net/core/dev.c (`bpf_xdp_link_attach`).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// bpf() commands (enum bpf_cmd).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
/// enum bpf_map_type.
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// enum bpf_prog_type.
const BPF_PROG_TYPE_XDP: u32 = 6;
/// enum bpf_attach_type.
const BPF_XDP: u32 = 37;
/// `bpf_redirect_map`'s helper number.
const FN_REDIRECT_MAP: i32 = 51;
/// `src_reg` of a `BPF_LD | BPF_DW | BPF_IMM` whose immediate is a map fd.
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// enum xdp_action.
const XDP_PASS: i32 = 2;
/// Offset of `rx_queue_index` in `struct xdp_md` (data, data_end, data_meta, ingress_ifindex, …).
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

// Opcodes (instruction classes | modes | sizes | operations).
const LDX_MEM_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const LD_IMM_DW: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW (two slots)
const ALU64_MOV_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const JMP_CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
const JMP_EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

/// `XDP_FLAGS_SKB_MODE` and `XDP_FLAGS_DRV_MODE` (include/uapi/linux/if_link.h).
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// How the program runs on the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver, before an skb exists (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// Generic XDP on the skb, after the driver (`XDP_FLAGS_SKB_MODE`): works on any interface.
    Generic,
}

impl AttachMode {
    pub fn name(self) -> &'static str {
        match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        }
    }
}

/// One encoded instruction.
pub fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = (dst & 0x0f) | (src << 4);
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    u64::from_le_bytes(b)
}

/// The program, for the map with fd `map_fd`:
///
/// ```text
/// r2 = *(u32 *)(r1 + offsetof(xdp_md, rx_queue_index))
/// r1 = map_fd  ll                        ; the loader swaps the fd for the map
/// r3 = XDP_PASS                          ; what to do when the queue has no socket
/// call bpf_redirect_map                  ; r0 = XDP_REDIRECT or XDP_PASS
/// exit
/// ```
pub fn program(map_fd: RawFd) -> [u64; 6] {
    [
        insn(LDX_MEM_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        insn(LD_IMM_DW, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0), // upper half of the 64-bit immediate
        insn(ALU64_MOV_K, 3, 0, 0, XDP_PASS),
        insn(JMP_CALL, 0, 0, 0, FN_REDIRECT_MAP),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ]
}

/// `union bpf_attr`, as far as the commands here use it: 128 zeroed bytes (the kernel requires
/// every byte past the fields a command knows to be zero).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, off: usize, s: &str) -> &mut Self {
        let n = s.len().min(15);
        self.0[off..off + n].copy_from_slice(&s.as_bytes()[..n]);
        self
    }
}

/// `bpf(cmd, attr, size)`; the error names `what`.
fn bpf(cmd: libc::c_long, attr: &mut Attr, what: &str) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, writable 128-byte buffer and its size is passed; pointers inside it
    // (set by the callers) point to buffers that outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            std::mem::size_of::<Attr>() as libc::c_uint,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("bpf({what}): {e}")))
    } else {
        Ok(r)
    }
}

fn bpf_fd(cmd: libc::c_long, attr: &mut Attr, what: &str) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr, what)?;
    // SAFETY: a successful map/program/link creation returns a new fd that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// An `XSKMAP`: queue index -> AF_XDP socket.
pub struct XskMap {
    fd: OwnedFd,
}

impl XskMap {
    pub fn create(entries: u32) -> io::Result<XskMap> {
        let mut a = Attr::new();
        a.u32(0, BPF_MAP_TYPE_XSKMAP)
            .u32(4, 4) // key: u32 queue index
            .u32(8, 4) // value: u32 socket fd
            .u32(12, entries.max(1))
            .name(28, "linkshare_xsks");
        Ok(XskMap {
            fd: bpf_fd(BPF_MAP_CREATE, &mut a, "BPF_MAP_CREATE XSKMAP")?,
        })
    }

    /// Send frames of queue `queue` to socket `xsk`.
    pub fn set(&self, queue: u32, xsk: RawFd) -> io::Result<()> {
        let key = queue;
        let value = xsk as u32;
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &value as *const u32 as u64)
            .u64(24, 0); // BPF_ANY
        bpf(BPF_MAP_UPDATE_ELEM, &mut a, "BPF_MAP_UPDATE_ELEM XSKMAP").map(|_| ())
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Load the redirect program for `map`. A verifier rejection carries the verifier's log.
pub fn load_program(map: &XskMap) -> io::Result<OwnedFd> {
    let insns = program(map.fd());
    let license = CString::new("GPL").map_err(|_| io::Error::other("license"))?;
    let mut log = vec![0u8; 16 * 1024];
    let mut a = Attr::new();
    a.u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, insns.len() as u32)
        .u64(8, insns.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .u32(24, 1) // log_level
        .u32(28, log.len() as u32)
        .u64(32, log.as_mut_ptr() as u64)
        .name(48, "linkshare_xsk")
        .u32(68, BPF_XDP); // expected_attach_type
    bpf_fd(BPF_PROG_LOAD, &mut a, "BPF_PROG_LOAD XDP").map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        if text.trim().is_empty() {
            e
        } else {
            io::Error::new(e.kind(), format!("{e}; verifier: {}", text.trim()))
        }
    })
}

/// Attach `prog` to interface `ifindex` in `mode` through a BPF link; detached when the returned
/// fd closes (process exit included).
pub fn attach(prog: &OwnedFd, ifindex: i32, mode: AttachMode) -> io::Result<OwnedFd> {
    let flags = match mode {
        AttachMode::Native => XDP_FLAGS_DRV_MODE,
        AttachMode::Generic => XDP_FLAGS_SKB_MODE,
    };
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(4, ifindex as u32)
        .u32(8, BPF_XDP)
        .u32(12, flags);
    let what = format!("BPF_LINK_CREATE BPF_XDP {}", mode.name());
    bpf_fd(BPF_LINK_CREATE, &mut a, &what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(i: u64) -> (u8, u8, u8, i16, i32) {
        let b = i.to_le_bytes();
        (
            b[0],
            b[1] & 0x0f,
            b[1] >> 4,
            i16::from_le_bytes([b[2], b[3]]),
            i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        )
    }

    #[test]
    fn instruction_fields_land_where_the_kernel_reads_them() {
        let i = insn(0x61, 2, 1, -3, -70000);
        assert_eq!(fields(i), (0x61, 2, 1, -3, -70000));
    }

    #[test]
    fn program_loads_queue_index_then_map_then_calls_redirect_and_exits() {
        let p = program(9);
        assert_eq!(fields(p[0]), (LDX_MEM_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0));
        assert_eq!(fields(p[1]), (LD_IMM_DW, 1, BPF_PSEUDO_MAP_FD, 0, 9));
        assert_eq!(p[2], 0, "second slot of the 64-bit load");
        assert_eq!(fields(p[3]), (ALU64_MOV_K, 3, 0, 0, XDP_PASS));
        assert_eq!(fields(p[4]).4, FN_REDIRECT_MAP);
        assert_eq!(fields(p[5]).0, JMP_EXIT);
    }
}
