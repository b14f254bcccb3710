package main

// End-to-end tests: run the peer in-process and drive it with a minimal,
// independent memif slave written against the protocol (not gomemif), which
// checks every echoed byte, the count and the order.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// syncBuf is an io.Writer safe for concurrent use.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type runningPeer struct {
	t    *testing.T
	cfg  config
	out  *syncBuf
	log  *syncBuf
	stop chan struct{}
	code chan int
}

func startPeer(t *testing.T, mod func(*config)) *runningPeer {
	t.Helper()
	cfg, err := parseFlags([]string{"-socket", filepath.Join(t.TempDir(), "memif.sock")}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(&cfg)
	}
	rp := &runningPeer{t: t, cfg: cfg, out: &syncBuf{}, log: &syncBuf{}, stop: make(chan struct{}), code: make(chan int, 1)}
	go func() { rp.code <- run(cfg, rp.out, rp.log, rp.stop) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.HasPrefix(rp.out.String(), "ready\n") {
		if time.Now().After(deadline) {
			t.Fatalf("peer not ready; log:\n%s", rp.log.String())
		}
		time.Sleep(time.Millisecond)
	}
	t.Cleanup(func() {
		select {
		case <-rp.stop:
		default:
			close(rp.stop)
		}
	})
	return rp
}

// finish stops the peer (unless it exits by itself) and returns its counters.
func (rp *runningPeer) finish(sendStop bool) countersSnapshot {
	rp.t.Helper()
	return rp.finishCode(sendStop, 0)
}

func (rp *runningPeer) finishCode(sendStop bool, want int) countersSnapshot {
	rp.t.Helper()
	if sendStop {
		close(rp.stop)
	}
	var code int
	select {
	case code = <-rp.code:
	case <-time.After(10 * time.Second):
		rp.t.Fatalf("peer did not exit; log:\n%s", rp.log.String())
	}
	if code != want {
		rp.t.Fatalf("peer exit code %d, want %d; log:\n%s", code, want, rp.log.String())
	}
	lines := strings.Split(strings.TrimSpace(rp.out.String()), "\n")
	if len(lines) != 2 || lines[0] != "ready" {
		rp.t.Fatalf("unexpected stdout %q", rp.out.String())
	}
	var c countersSnapshot
	if err := json.Unmarshal([]byte(lines[1]), &c); err != nil {
		rp.t.Fatalf("bad JSON %q: %v", lines[1], err)
	}
	return c
}

// ---- minimal memif slave ----

type slaveCfg struct {
	id     uint32
	secret string
	nq     int
	log2   int
	s2mBuf int // S2M buffer size (slave TX)
	m2sBuf int // capacity posted in M2S descriptors (slave RX)

	hangUpAfterRegion bool // abort the handshake after ADD_REGION
}

type testSlave struct {
	t        *testing.T
	cfg      slaveCfg
	conn     *net.UnixConn
	mem      []byte
	memFd    int
	efds     []int // S2M rings then M2S rings
	size     int
	stride   int
	bufStart int
	m2sStart int
	s2mHead  []uint16
	m2sTail  []uint16 // last M2S tail consumed
}

func (s *testSlave) s2mRing(q int) int  { return q * s.stride }
func (s *testSlave) m2sRing(q int) int  { return (s.cfg.nq + q) * s.stride }
func (s *testSlave) u16(at int) *uint16 { return (*uint16)(unsafe.Pointer(&s.mem[at])) }
func (s *testSlave) u32(at int) *uint32 { return (*uint32)(unsafe.Pointer(&s.mem[at])) }
func (s *testSlave) descAt(ring, slot int) int {
	return ring + ringHeaderSize + (slot&(s.size-1))*descSize
}

func (s *testSlave) sendMsg(msg []byte, fd int) {
	s.t.Helper()
	var oob []byte
	if fd >= 0 {
		oob = syscall.UnixRights(fd)
	}
	if _, _, err := s.conn.WriteMsgUnix(msg, oob, nil); err != nil {
		s.t.Fatalf("send: %v", err)
	}
}

// recvMsg returns the message type and the 128-byte message.
func (s *testSlave) recvMsg() (uint16, []byte) {
	s.t.Helper()
	buf := make([]byte, 256)
	oob := make([]byte, 256)
	_ = s.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, _, _, err := s.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		s.t.Fatalf("recv: %v", err)
	}
	if n != 128 {
		s.t.Fatalf("control message of %d bytes, want 128", n)
	}
	return binary.LittleEndian.Uint16(buf), buf[:n]
}

func msg(typ uint16) []byte {
	m := make([]byte, 128)
	binary.LittleEndian.PutUint16(m, typ)
	return m
}

// dialSlave connects and runs the handshake up to INIT. If the master
// rejects INIT it returns the DISCONNECT reason and a nil slave.
func dialSlave(t *testing.T, sock string, cfg slaveCfg) (*testSlave, string) {
	t.Helper()
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	s := &testSlave{t: t, cfg: cfg, conn: conn, size: 1 << cfg.log2}
	typ, hello := s.recvMsg()
	if typ != 2 || binary.LittleEndian.Uint16(hello[34:]) != 0x0200 || hello[44] != 14 {
		t.Fatalf("bad HELLO %x", hello[:46])
	}
	init := msg(3)
	binary.LittleEndian.PutUint16(init[2:], 0x0200)
	binary.LittleEndian.PutUint32(init[4:], cfg.id)
	copy(init[9:33], cfg.secret)
	copy(init[33:65], "test-slave")
	s.sendMsg(init, -1)
	typ, reply := s.recvMsg()
	if typ == 8 {
		conn.Close()
		return nil, string(bytes.TrimRight(reply[6:102], "\x00"))
	}
	if typ != 1 {
		t.Fatalf("INIT answered with type %d", typ)
	}
	if reason := s.setup(); reason != "" {
		s.close()
		return nil, reason
	}
	return s, ""
}

// setup creates the shared memory and runs the handshake from ADD_REGION
// on. It returns the reason if the master answers with DISCONNECT.
func (s *testSlave) setup() string {
	t, nq := s.t, s.cfg.nq
	s.stride = ringHeaderSize + descSize*s.size
	s.bufStart = 2 * nq * s.stride
	s.m2sStart = s.bufStart + nq*s.size*s.cfg.s2mBuf
	total := s.m2sStart + nq*s.size*s.cfg.m2sBuf
	f, err := os.CreateTemp("", "memif-test-region-")
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(f.Name())
	if err := f.Truncate(int64(total)); err != nil {
		t.Fatal(err)
	}
	s.memFd, err = syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	s.mem, err = syscall.Mmap(s.memFd, 0, total, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	for q := 0; q < nq; q++ {
		for _, ring := range []int{s.s2mRing(q), s.m2sRing(q)} {
			*s.u32(ring) = memifCookie
			*s.u16(ring + ringFlagsOff) = 0
			*s.u16(ring + ringHeadOff) = 0
			*s.u16(ring + ringTailOff) = 0
		}
		for j := 0; j < s.size; j++ {
			d := s.descAt(s.s2mRing(q), j)
			*s.u16(d) = 0
			*s.u16(d + 2) = 0
			*s.u32(d + 4) = uint32(s.cfg.s2mBuf)
			*s.u32(d + 8) = uint32(s.bufStart + (q*s.size+j)*s.cfg.s2mBuf)
			d = s.descAt(s.m2sRing(q), j)
			*s.u16(d) = 0
			*s.u16(d + 2) = 0
			*s.u32(d + 4) = uint32(s.cfg.m2sBuf)
			*s.u32(d + 8) = uint32(s.m2sStart + (q*s.size+j)*s.cfg.m2sBuf)
		}
		// Post every M2S buffer; the slave polls M2S, so mask interrupts.
		*s.u16(s.m2sRing(q) + ringFlagsOff) = 1
		*s.u16(s.m2sRing(q) + ringHeadOff) = uint16(s.size)
	}
	s.s2mHead = make([]uint16, nq)
	s.m2sTail = make([]uint16, nq)

	m := msg(4)
	binary.LittleEndian.PutUint64(m[4:], uint64(total))
	s.sendMsg(m, s.memFd)
	if r := s.ack(); r != "" {
		return r
	}
	if s.cfg.hangUpAfterRegion {
		return "slave hung up"
	}
	for dir := 0; dir < 2; dir++ {
		for q := 0; q < nq; q++ {
			efd, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, 0x800|syscall.O_CLOEXEC, 0)
			if errno != 0 {
				t.Fatal(errno)
			}
			s.efds = append(s.efds, int(efd))
			m := msg(5)
			off := s.s2mRing(q)
			if dir == 0 {
				binary.LittleEndian.PutUint16(m[2:], 1) // S2M
			} else {
				off = s.m2sRing(q)
			}
			binary.LittleEndian.PutUint16(m[4:], uint16(q))
			binary.LittleEndian.PutUint32(m[8:], uint32(off))
			m[12] = byte(s.cfg.log2)
			s.sendMsg(m, int(efd))
			if r := s.ack(); r != "" {
				return r
			}
		}
	}
	m = msg(6)
	copy(m[2:], "test-slave-if")
	s.sendMsg(m, -1)
	if typ, m := s.recvMsg(); typ != 7 {
		s.t.Fatalf("CONNECT answered with type %d (%q)", typ, bytes.TrimRight(m[6:102], "\x00"))
	}
	return ""
}

// ack reads the reply to a handshake message: "" for ACK, the reason for
// DISCONNECT.
func (s *testSlave) ack() string {
	s.t.Helper()
	typ, m := s.recvMsg()
	switch typ {
	case 1:
		return ""
	case 8:
		return "DISCONNECT: " + string(bytes.TrimRight(m[6:102], "\x00"))
	}
	s.t.Fatalf("got message type %d, want ACK", typ)
	return ""
}

// drained reports whether the master has taken every frame we put on queue
// q's S2M ring (its tail caught up with our head).
func (s *testSlave) drained(q int) bool {
	return *s.u16(s.s2mRing(q) + ringTailOff) == s.s2mHead[q]
}

// send tries to put one frame on S2M ring q; false if the ring is full.
func (s *testSlave) send(q int, frame []byte) bool {
	ring := s.s2mRing(q)
	head := s.s2mHead[q]
	tail := *s.u16(ring + ringTailOff)
	free := s.size - int(head-tail)
	need := max(1, (len(frame)+s.cfg.s2mBuf-1)/s.cfg.s2mBuf)
	if need > free {
		return false
	}
	for k := 0; k < need; k++ {
		d := s.descAt(ring, int(head)+k)
		seg := frame[k*s.cfg.s2mBuf : min(len(frame), (k+1)*s.cfg.s2mBuf)]
		off := int(*s.u32(d + 8))
		copy(s.mem[off:], seg)
		*s.u32(d + 4) = uint32(len(seg))
		if k < need-1 {
			*s.u16(d) = descFlagNext
		} else {
			*s.u16(d) = 0
		}
	}
	*s.u16(ring + ringHeadOff) = head + uint16(need)
	s.s2mHead[q] = head + uint16(need)
	if *s.u16(ring + ringFlagsOff)&1 == 0 {
		one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
		_, _ = syscall.Write(s.efds[q], one)
	}
	return true
}

// recv returns the next echoed frame on M2S ring q, or nil.
func (s *testSlave) recv(q int) ([]byte, error) {
	ring := s.m2sRing(q)
	tail := *s.u16(ring + ringTailOff)
	if tail == s.m2sTail[q] {
		return nil, nil
	}
	frame := []byte{}
	for {
		if s.m2sTail[q] == tail {
			return nil, fmt.Errorf("M2S chain not terminated before tail %d", tail)
		}
		d := s.descAt(ring, int(s.m2sTail[q]))
		flags, length, off := *s.u16(d), int(*s.u32(d + 4)), int(*s.u32(d + 8))
		slot := int(s.m2sTail[q]) & (s.size - 1)
		if int(*s.u16(d + 2)) != 0 || off != s.m2sStart+(q*s.size+slot)*s.cfg.m2sBuf {
			return nil, fmt.Errorf("master changed M2S descriptor region/offset")
		}
		if length > s.cfg.m2sBuf {
			return nil, fmt.Errorf("master wrote %d bytes into a %d-byte M2S buffer", length, s.cfg.m2sBuf)
		}
		frame = append(frame, s.mem[off:off+length]...)
		// Re-post the buffer.
		*s.u16(d) = 0
		*s.u32(d + 4) = uint32(s.cfg.m2sBuf)
		s.m2sTail[q]++
		*s.u16(ring + ringHeadOff) = s.m2sTail[q] + uint16(s.size)
		if flags&descFlagNext == 0 {
			return frame, nil
		}
	}
}

func (s *testSlave) close() {
	s.conn.Close()
	for _, fd := range s.efds {
		syscall.Close(fd)
	}
	if s.mem != nil {
		syscall.Munmap(s.mem)
		syscall.Close(s.memFd)
	}
}

func frameFor(seq uint64, size int) []byte {
	f := make([]byte, size)
	for i := range f {
		f[i] = byte(seq*131 + uint64(i)*7 + uint64(i>>8))
	}
	if size >= 8 {
		binary.LittleEndian.PutUint64(f, seq)
	}
	return f
}

// pump sends n frames on queue q (sizes cycled) and checks that exactly the
// frames for which echoed(size) is true come back, in order and intact.
func pump(t *testing.T, s *testSlave, q int, n int, sizes []int, echoed func(int) bool) (sent, got int) {
	t.Helper()
	sent, got, err := pumpErr(s, q, n, sizes, echoed)
	if err != nil {
		t.Fatal(err)
	}
	return sent, got
}

// pumpErr is pump without t.Fatal, usable from other goroutines. It only
// touches queue q's state of the slave.
func pumpErr(s *testSlave, q int, n int, sizes []int, echoed func(int) bool) (sent, got int, err error) {
	var expect [][]byte
	next := 0
	last := time.Now()
	// Done when every echo came back and the master took every frame, so that
	// its counters cover the frames it does not echo too.
	for next < n || len(expect) > 0 || !s.drained(q) {
		progress := false
		for next < n {
			f := frameFor(uint64(q)<<32|uint64(next), sizes[next%len(sizes)])
			if !s.send(q, f) {
				break
			}
			if echoed(len(f)) {
				expect = append(expect, f)
			}
			next++
			progress = true
		}
		for {
			f, err := s.recv(q)
			if err != nil {
				return next, got, fmt.Errorf("queue %d: %v", q, err)
			}
			if f == nil {
				break
			}
			progress = true
			if len(expect) == 0 {
				return next, got, fmt.Errorf("queue %d: unexpected extra frame of %d bytes", q, len(f))
			}
			if !bytes.Equal(f, expect[0]) {
				return next, got, fmt.Errorf("queue %d: echo #%d differs: got %d bytes %x..., want %d bytes %x...",
					q, got, len(f), f[:min(16, len(f))], len(expect[0]), expect[0][:min(16, len(expect[0]))])
			}
			expect = expect[1:]
			got++
		}
		if progress {
			last = time.Now()
			continue
		}
		// Let the in-process peer run: a spinning slave can starve it of
		// the machine's few Ps.
		runtime.Gosched()
		if time.Since(last) > 5*time.Second {
			return next, got, fmt.Errorf("queue %d: stalled after %d sent, %d echoed, %d outstanding, ring drained %v", q, next, got, len(expect), s.drained(q))
		}
	}
	return next, got, nil
}

func all(int) bool { return true }

func TestEcho100kWithExitAfter(t *testing.T) {
	const n = 100000
	rp := startPeer(t, func(c *config) { c.exitAfter = n })
	s, _ := dialSlave(t, rp.cfg.socket, slaveCfg{nq: 1, log2: 10, s2mBuf: 2048, m2sBuf: 2048})
	defer s.close()
	sizes := []int{60, 64, 65, 128, 512, 1000, 1500, 1514, 2047, 2048, 14, 1, 0}
	sent, got := pump(t, s, 0, n, sizes, all)
	c := rp.finish(false) // -exit-after makes it exit by itself
	if sent != n || got != n || c.RxPackets != n || c.TxPackets != n || c.TxErrors != 0 || c.Connections != 1 {
		t.Fatalf("sent %d got %d counters %+v", sent, got, c)
	}
	if c.RxBytes != c.TxBytes {
		t.Fatalf("rx_bytes %d != tx_bytes %d", c.RxBytes, c.TxBytes)
	}
	// The peer sends DISCONNECT when it exits.
	if typ, _ := s.recvMsg(); typ != 8 {
		t.Fatalf("expected DISCONNECT, got %d", typ)
	}
}

func TestChainedS2MSmallRing(t *testing.T) {
	// 512-byte S2M buffers: 9000-byte frames arrive as 18-slot chains on a
	// 64-entry ring. M2S buffers are big enough to echo without chaining.
	rp := startPeer(t, nil)
	s, _ := dialSlave(t, rp.cfg.socket, slaveCfg{nq: 1, log2: 6, s2mBuf: 512, m2sBuf: 10240})
	defer s.close()
	sizes := []int{64, 511, 512, 513, 1500, 9000, 10240, 3000}
	const n = 20000
	_, got := pump(t, s, 0, n, sizes, all)
	c := rp.finish(true)
	if got != n || c.RxPackets != n || c.TxPackets != n || c.TxErrors != 0 {
		t.Fatalf("got %d counters %+v", got, c)
	}
}

func TestFrameLargerThanM2SBufferIsNotSent(t *testing.T) {
	rp := startPeer(t, nil)
	s, _ := dialSlave(t, rp.cfg.socket, slaveCfg{nq: 1, log2: 8, s2mBuf: 2048, m2sBuf: 1024})
	defer s.close()
	sizes := []int{100, 1024, 1025, 2000, 60}
	const n = 5000
	_, got := pump(t, s, 0, n, sizes, func(sz int) bool { return sz <= 1024 })
	c := rp.finish(true)
	if got != 3000 || c.RxPackets != n || c.TxPackets != 3000 || c.TxErrors != 2000 {
		t.Fatalf("got %d counters %+v", got, c)
	}
}

func TestMaxFrame(t *testing.T) {
	rp := startPeer(t, func(c *config) { c.maxFrame = 1000 })
	s, _ := dialSlave(t, rp.cfg.socket, slaveCfg{nq: 1, log2: 8, s2mBuf: 2048, m2sBuf: 2048})
	defer s.close()
	_, got := pump(t, s, 0, 1000, []int{1000, 1001}, func(sz int) bool { return sz <= 1000 })
	c := rp.finish(true)
	if got != 500 || c.RxPackets != 1000 || c.TxPackets != 500 || c.RxOversize != 500 || c.TxErrors != 0 {
		t.Fatalf("got %d counters %+v", got, c)
	}
}

func TestMultiQueue(t *testing.T) {
	for _, mode := range []string{"interrupt", "poll"} {
		t.Run(mode, func(t *testing.T) {
			rp := startPeer(t, func(c *config) { c.queues = 3; c.rxMode = mode })
			s, _ := dialSlave(t, rp.cfg.socket, slaveCfg{nq: 3, log2: 9, s2mBuf: 2048, m2sBuf: 2048})
			defer s.close()
			// One goroutine per queue, all running at once.
			var wg sync.WaitGroup
			const n = 10000
			results := make([]int, 3)
			errs := make([]error, 3)
			for q := 0; q < 3; q++ {
				wg.Add(1)
				go func(q int) {
					defer wg.Done()
					_, results[q], errs[q] = pumpErr(s, q, n, []int{64, 1500, 200 + q}, all)
				}(q)
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			c := rp.finish(true)
			if results[0]+results[1]+results[2] != 3*n || c.TxPackets != 3*n || c.RxPackets != 3*n {
				t.Fatalf("results %v counters %+v", results, c)
			}
		})
	}
}

func TestNoSecretRejectsSlaveWithSecret(t *testing.T) {
	rp := startPeer(t, nil)
	cfg := slaveCfg{secret: "x", nq: 1, log2: 8, s2mBuf: 2048, m2sBuf: 2048}
	if s, reason := dialSlave(t, rp.cfg.socket, cfg); s != nil || reason != "Invalid secret" {
		t.Fatalf("reason %q", reason)
	}
	rp.finish(true)
}

func TestReconnectAndSecret(t *testing.T) {
	rp := startPeer(t, func(c *config) { c.secret = "s3cret"; c.id = 7 })
	cfg := slaveCfg{id: 7, secret: "wrong", nq: 1, log2: 10, s2mBuf: 2048, m2sBuf: 2048}
	if s, reason := dialSlave(t, rp.cfg.socket, cfg); s != nil || reason == "" {
		t.Fatalf("wrong secret accepted")
	}
	cfg.secret = ""
	if s, _ := dialSlave(t, rp.cfg.socket, cfg); s != nil {
		t.Fatalf("missing secret accepted")
	}
	cfg.secret = "s3cret"
	cfg.id = 8
	if s, _ := dialSlave(t, rp.cfg.socket, cfg); s != nil {
		t.Fatalf("wrong id accepted")
	}
	cfg.id = 7
	for round := 0; round < 3; round++ {
		s, reason := dialSlave(t, rp.cfg.socket, cfg)
		if s == nil {
			t.Fatalf("round %d rejected: %s", round, reason)
		}
		if _, got := pump(t, s, 0, 3000, []int{64, 1514}, all); got != 3000 {
			t.Fatalf("round %d: %d echoed", round, got)
		}
		s.close()
		// Wait until the peer has processed the hang-up.
		deadline := time.Now().Add(5 * time.Second)
		for strings.Count(rp.log.String(), "gomemif-peer: disconnected") < round+1 {
			if time.Now().After(deadline) {
				t.Fatalf("no disconnect; log:\n%s", rp.log.String())
			}
			time.Sleep(time.Millisecond)
		}
	}
	c := rp.finish(true)
	if c.Connections != 3 || c.Disconnects != 3 || c.TxPackets != 9000 {
		t.Fatalf("counters %+v", c)
	}
}

// TestSubprocess drives the built binary the way the Rust suite does: wait
// for "ready", echo frames, stop with SIGTERM, parse the final JSON line.
func TestSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "gomemif-peer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		slave slaveCfg
		sizes []int
		n     int
	}{
		{"2048-buffers", nil, slaveCfg{nq: 1, log2: 10, s2mBuf: 2048, m2sBuf: 2048}, []int{60, 64, 1500, 2048}, 100000},
		{"chained-s2m-64-ring", nil, slaveCfg{nq: 1, log2: 6, s2mBuf: 512, m2sBuf: 10240}, []int{64, 513, 1500, 9000, 10240}, 20000},
		{"2-queues-poll", []string{"-queues", "2", "-rx-mode", "poll"}, slaveCfg{nq: 2, log2: 8, s2mBuf: 2048, m2sBuf: 2048}, []int{64, 1514}, 20000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "memif.sock")
			cmd := exec.Command(bin, append([]string{"-socket", sock}, tc.args...)...)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr syncBuf
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := bufio.NewScanner(stdout)
			if !lines.Scan() || lines.Text() != "ready" {
				t.Fatalf("no ready line: %q; stderr:\n%s", lines.Text(), stderr.String())
			}
			s, _ := dialSlave(t, sock, tc.slave)
			st := time.Now()
			total := 0
			for q := 0; q < tc.slave.nq; q++ {
				_, got := pump(t, s, q, tc.n, tc.sizes, all)
				total += got
			}
			elapsed := time.Since(st)
			s.close()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if !lines.Scan() {
				t.Fatalf("no JSON line; stderr:\n%s", stderr.String())
			}
			var c countersSnapshot
			if err := json.Unmarshal(lines.Bytes(), &c); err != nil {
				t.Fatalf("bad JSON %q: %v", lines.Text(), err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
			}
			want := uint64(tc.n * tc.slave.nq)
			if uint64(total) != want || c.RxPackets != want || c.TxPackets != want || c.TxErrors != 0 || c.Connections != 1 {
				t.Fatalf("echoed %d, counters %+v", total, c)
			}
			if _, err := os.Stat(sock); !os.IsNotExist(err) {
				t.Fatalf("socket file left behind: %v", err)
			}
			t.Logf("%d frames echoed in %v", total, elapsed)
		})
	}
}

// A handshake that fails after ADD_REGION wedges a stock gomemif v0.1.0
// master for good; the peer's workaround must let the next slave connect.
func TestRecoverAfterFailedHandshake(t *testing.T) {
	rp := startPeer(t, nil) // -queues 1
	bad := slaveCfg{nq: 2, log2: 8, s2mBuf: 2048, m2sBuf: 2048}
	if s, reason := dialSlave(t, rp.cfg.socket, bad); s != nil || !strings.Contains(reason, "invalid ring index") {
		t.Fatalf("2 queue pairs accepted by a -queues 1 master (reason %q)", reason)
	}
	hangup := slaveCfg{nq: 1, log2: 8, s2mBuf: 2048, m2sBuf: 2048, hangUpAfterRegion: true}
	if s, _ := dialSlave(t, rp.cfg.socket, hangup); s != nil {
		t.Fatal("unexpected success")
	}
	good := slaveCfg{nq: 1, log2: 8, s2mBuf: 2048, m2sBuf: 2048}
	var s *testSlave
	var reason string
	deadline := time.Now().Add(5 * time.Second)
	for s == nil {
		// The hang-up is handled asynchronously; retry until it is.
		if s, reason = dialSlave(t, rp.cfg.socket, good); s == nil && time.Now().After(deadline) {
			t.Fatalf("interface wedged after a failed handshake: %s\nlog:\n%s", reason, rp.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer s.close()
	if _, got := pump(t, s, 0, 1000, []int{64, 1500}, all); got != 1000 {
		t.Fatalf("echoed %d", got)
	}
	c := rp.finish(true)
	if c.Connections != 1 || c.TxPackets != 1000 {
		t.Fatalf("counters %+v", c)
	}
	if n := strings.Count(rp.log.String(), "dropped 1 unmapped region"); n != 2 {
		t.Fatalf("workaround applied %d times, want 2; log:\n%s", n, rp.log.String())
	}
}

// A stock gomemif v0.1.0 master dies with a nil pointer dereference when a
// client closes the socket before INIT; the peer's poll loop recovers.
func TestHangUpBeforeInit(t *testing.T) {
	rp := startPeer(t, nil)
	for k := 0; k < 3; k++ {
		conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: rp.cfg.socket, Net: "unixpacket"})
		if err != nil {
			t.Fatal(err)
		}
		if k > 0 { // also hang up without reading HELLO
			buf := make([]byte, 128)
			if n, err := conn.Read(buf); err != nil || n != 128 {
				t.Fatalf("HELLO: %d %v", n, err)
			}
		}
		conn.Close()
	}
	s, reason := dialSlave(t, rp.cfg.socket, slaveCfg{nq: 1, log2: 8, s2mBuf: 2048, m2sBuf: 2048})
	if s == nil {
		t.Fatal(reason)
	}
	defer s.close()
	if _, got := pump(t, s, 0, 1000, []int{64}, all); got != 1000 {
		t.Fatalf("echoed %d", got)
	}
	c := rp.finish(true)
	if c.Connections != 1 || c.TxPackets != 1000 {
		t.Fatalf("counters %+v", c)
	}
	if n := strings.Count(rp.log.String(), "closed by the peer before INIT"); n != 3 {
		t.Fatalf("%d recovered hang-ups, want 3; log:\n%s", n, rp.log.String())
	}
}

// CONNECT before INIT also makes gomemif dereference a nil interface. The
// peer reports it and exits with code 3 (after printing the counters).
func TestMessageBeforeInitIsFatal(t *testing.T) {
	rp := startPeer(t, nil)
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: rp.cfg.socket, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 128)
	if _, err := conn.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(msg(6)); err != nil {
		t.Fatal(err)
	}
	rp.finishCode(false, 3)
	if !strings.Contains(rp.log.String(), "gomemif panicked") {
		t.Fatalf("log:\n%s", rp.log.String())
	}
}
