//go:build soak

// The soak's traffic (soak_test.go runs it and checks what it counted): pings between tap
// pods, rounds of `veclane gen` between memif pods, and the floods from the underlay.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"veclane.dev/cni/ctl"
)

// pinger is `ping -D -O` from a pod: the time and sequence number of each line, so that each
// lost ping has a time (-O prints "no answer yet" when the next one is sent).
type pinger struct {
	name      string
	from, to  *node
	ns, dst   string
	cmd       *exec.Cmd
	done      chan struct{}
	at        map[int]time.Time
	replied   map[int]bool
	sendErrs  []time.Time // "ping: sendmsg: ..." (the pod's device gone with its daemon)
	sent, got int
}

var seqLine = regexp.MustCompile(`^\[(\d+\.\d+)\] (.*)icmp_seq=(\d+)`)

func startPinger(name string, from, to *node, ns, dst string) (*pinger, error) {
	p := &pinger{name: name, from: from, to: to, ns: ns, dst: dst, done: make(chan struct{}),
		at: map[int]time.Time{}, replied: map[int]bool{}}
	p.cmd = exec.Command("ip", "netns", "exec", ns, "ping", "-n", "-D", "-O", "-i", fmt.Sprint(pingInterval.Seconds()), dst)
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.done)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			line := sc.Text()
			if m := seqLine.FindStringSubmatch(line); m != nil {
				ts, _ := strconv.ParseFloat(m[1], 64)
				seq, _ := strconv.Atoi(m[3])
				if _, ok := p.at[seq]; !ok {
					p.at[seq] = time.Unix(0, int64(ts*1e9))
				}
				p.replied[seq] = p.replied[seq] || strings.Contains(m[2], "bytes from")
			} else if strings.HasPrefix(line, "ping: ") {
				p.sendErrs = append(p.sendErrs, time.Now())
			} else {
				fmt.Sscanf(line, "%d packets transmitted, %d received", &p.sent, &p.got)
			}
		}
	}()
	return p, nil
}

func (p *pinger) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	<-p.done
	_ = p.cmd.Wait()
}

// lost is when each unanswered ping was sent: its own line's time, else a neighbouring
// sequence number's shifted by the interval. The last one sent is left out: it was in flight
// when ping was stopped.
func (p *pinger) lost() []time.Time {
	var out []time.Time
	for seq := 1; seq < p.sent; seq++ {
		var when time.Time
		for d := 0; d < 100 && when.IsZero() && !p.replied[seq]; d++ {
			if t, ok := p.at[seq-d]; ok {
				when = t.Add(time.Duration(d) * pingInterval)
			} else if t, ok := p.at[seq+d]; ok {
				when = t.Add(-time.Duration(d) * pingInterval)
			}
		}
		if !p.replied[seq] {
			out = append(out, when)
		}
	}
	return out
}

// genLoop sends rounds of 8000 frames from m2 (n2) to m3 (n3) for the whole run.
func (s *soak) genLoop(ctx context.Context) {
	for ctx.Err() == nil {
		r := s.genRound(8000)
		if r.Err != "" || r.Got != r.Sent {
			s.t.Logf("memif round %.0f–%.0f s: sent %d, received %d; n2 took %d from m2, n3 put %d on m3's ring and dropped %d for want of room; %d glean drops, %d uplink drops; %s; counters that moved a little: %s",
				s.since(r.from), s.since(r.to), r.Sent, r.Got, r.In2, r.Out3, r.NoRoom3, r.Glean, r.Uplinks, r.Err, strings.Join(r.fewErrs, "; "))
		}
		s.mu.Lock()
		s.rounds = append(s.rounds, r)
		s.mu.Unlock()
	}
}

// genRound: m3 listens, m2 sends count frames at 1000/s; the reports, and what n2 and n3
// counted meanwhile.
func (s *soak) genRound(count int) genRound {
	sc := s.sc
	gen := func(ns string, r podResult, args ...string) *exec.Cmd {
		return exec.Command("ip", append([]string{"netns", "exec", ns, s.veclane, "gen", "--socket", r.Interfaces[1].SocketPath,
			"--src-mac", r.Interfaces[1].Mac, "--dst-mac", r.Interfaces[0].Mac, "--src-ip", addr(r), "--json",
			"--connect-timeout", "5"}, args...)...)
	}
	r := genRound{from: time.Now()}
	before, errBefore := s.pathCounters()
	// m3 listens until 4 s after m2's last chance to send (a loaded machine starts m2 late).
	var rxOut, rxErr bytes.Buffer
	rx := gen(sc.m3, sc.rm3, "--rx-only", "--duration", fmt.Sprint(count/1000+7))
	rx.Stdout, rx.Stderr = &rxOut, &rxErr
	if err := rx.Start(); err != nil {
		r.Err = err.Error()
		return r
	}
	time.Sleep(time.Second)
	txOut, txErr := gen(sc.m2, sc.rm2, "--tx-only", "--dst-ip", addr(sc.rm3), "--rate", "1000",
		"--count", fmt.Sprint(count), "--duration", fmt.Sprint(count/1000+2)).Output()
	_ = rx.Wait()
	r.to = time.Now()
	if ee, ok := txErr.(*exec.ExitError); ok {
		r.Err = fmt.Sprintf("gen in m2: %v: %s", txErr, bytes.TrimSpace(ee.Stderr))
	}
	var tx, rxr struct {
		Tx uint64 `json:"tx_packets"`
		Rx uint64 `json:"rx_packets"`
	}
	if json.Unmarshal(txOut, &tx) != nil || json.Unmarshal(rxOut.Bytes(), &rxr) != nil {
		r.Err += fmt.Sprintf(" reports: %q %q (m3: %s)", txOut, rxOut.String(), bytes.TrimSpace(rxErr.Bytes()))
	}
	r.Sent, r.Got = tx.Tx, rxr.Rx
	after, errAfter := s.pathCounters()
	// A daemon restarted during the round starts its counters again: the differences are
	// then meaningless, and the round in a restart window.
	if errBefore != nil || errAfter != nil || after.m2.RxPackets < before.m2.RxPackets || after.m3.TxPackets < before.m3.TxPackets ||
		after.up2.TxPackets < before.up2.TxPackets || after.up3.RxPackets < before.up3.RxPackets {
		r.Err += " counters unavailable or restarted"
		return r
	}
	r.In2, r.Out3 = after.m2.RxPackets-before.m2.RxPackets, after.m3.TxPackets-before.m3.TxPackets
	r.NoRoom3 = after.m3.TxNoRoom - before.m3.TxNoRoom
	r.Glean = gleanDrops(after.errs2) - gleanDrops(before.errs2) + gleanDrops(after.errs3) - gleanDrops(before.errs3)
	r.Uplinks = after.up2.TxNoRoom - before.up2.TxNoRoom + after.up3.RxErrors - before.up3.RxErrors
	for _, e := range []struct {
		node          string
		before, after map[string]uint64
	}{{"n2", before.errs2, after.errs2}, {"n3", before.errs3, after.errs3}} {
		for k, v := range e.after {
			if d := v - e.before[k]; d > 0 {
				r.errs = append(r.errs, fmt.Sprintf("%s %s +%d", e.node, k, d))
				if d < 100 { // the flood moves its counters by thousands a round
					r.fewErrs = append(r.fewErrs, fmt.Sprintf("%s %s +%d", e.node, k, d))
				}
			}
		}
	}
	sort.Strings(r.errs)
	sort.Strings(r.fewErrs)
	return r
}

// pathCounters is what n2 and n3 count on the memif path: m2's and m3's memif interfaces,
// their uplinks, and every error counter.
type pathCounters struct {
	m2, m3, up2, up3 ctl.Interface
	errs2, errs3     map[string]uint64
}

func (s *soak) pathCounters() (pathCounters, error) {
	var c pathCounters
	var errs [6]error
	c.m2, errs[0] = ifaceOf(s.sc.n2, s.sc.rm2.Interfaces[0].Name)
	c.m3, errs[1] = ifaceOf(s.sc.n3, s.sc.rm3.Interfaces[0].Name)
	c.up2, errs[2] = ifaceOf(s.sc.n2, "uplink")
	c.up3, errs[3] = ifaceOf(s.sc.n3, "uplink")
	c.errs2, errs[4] = s.errorCounters(s.sc.n2)
	c.errs3, errs[5] = s.errorCounters(s.sc.n3)
	return c, errors.Join(errs[:]...)
}

func ifaceOf(n *node, name string) (ctl.Interface, error) {
	return onDaemon(n, func(c *ctl.Client) (ctl.Interface, error) { return c.Interface(name) })
}

// flooder sends the underlay's noise into the bridge from fl0 with an AF_PACKET socket,
// floodPPS frames a second, eight kinds in turn (see send). The Ethernet source is always
// fl0's MAC, so the bridge learns one address; ARP senders, addresses and ports vary. A VTEP
// (.1 to .3) is never an ARP sender: poisoning one would cut the cluster, which ARP on a
// shared segment allows and this soak does not test.
type flooder struct {
	s           *soak
	fd          int
	rng         *rand.Rand
	mac         []byte
	vteps       []netip.Addr
	macs        [][]byte // each node's uplink MAC
	targets     []podTarget
	Sent        map[string]int64
	offLinkToN1 uint64 // off-link ARP frames n1's arp-input gets (broadcast, or to n1's MAC)
}

// podTarget is a blue tap pod reached by VXLAN from a spoofed peer VTEP.
type podTarget struct {
	node   int
	src    netip.Addr // another node's VTEP, which this node has a blue tunnel to
	tunMAC []byte     // that tunnel's MAC here
	addr   netip.Addr
}

func (s *soak) newFlooder(seed uint64) *flooder {
	f := &flooder{s: s, rng: rand.New(rand.NewPCG(seed, 2)), Sent: map[string]int64{}}
	var err error
	if f.fd, f.mac, err = packetSocket(s.l.tag+"br", "fl0"); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { unix.Close(f.fd) })
	for _, n := range s.l.nodes {
		up, err := ifaceOf(n, "uplink")
		mac, perr := net.ParseMAC(up.MAC)
		if err != nil || perr != nil {
			s.t.Fatalf("%s's uplink: %v %v", n.name, err, perr)
		}
		f.vteps, f.macs = append(f.vteps, netip.MustParseAddr(n.vtep)), append(f.macs, mac)
	}
	if f.refresh(); len(f.targets) == 0 {
		s.t.Fatal("flood: no blue tunnel to spoof")
	}
	return f
}

// packetSocket opens a raw AF_PACKET socket on ifname in namespace ns; it and ifname's MAC.
func packetSocket(ns, ifname string) (fd int, mac []byte, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread, moved into ns, ends with this goroutine
		nsf, e := os.Open("/var/run/netns/" + ns)
		if err = e; err != nil {
			return
		}
		defer nsf.Close()
		if err = unix.Setns(int(nsf.Fd()), unix.CLONE_NEWNET); err != nil {
			return
		}
		ifi, e := net.InterfaceByName(ifname)
		if err = e; err != nil {
			return
		}
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err == nil {
			mac, err = ifi.HardwareAddr, unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index})
		}
	}()
	<-done
	return fd, mac, err
}

// refresh finds the blue tunnels again (a restarted daemon makes them anew).
func (f *flooder) refresh() {
	var targets []podTarget
	for i, n := range f.s.l.nodes {
		c, err := ctl.Dial(n.sock())
		if err != nil {
			return
		}
		tuns, err1 := c.Tunnels()
		ifs, err2 := c.Interfaces()
		c.Close()
		if err1 != nil || err2 != nil {
			return
		}
		for _, tun := range tuns {
			for _, ifc := range ifs {
				if mac, err := net.ParseMAC(ifc.MAC); err == nil && ifc.Name == tun.Name && tun.Network == "blue" {
					targets = append(targets, podTarget{i, tun.Dst, mac, netip.MustParseAddr(f.s.blue[i])})
				}
			}
		}
	}
	f.targets = targets
}

func (f *flooder) run(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	refreshed := time.Now()
	for i := 0; ctx.Err() == nil; <-tick.C {
		if time.Since(refreshed) > sampleEvery {
			f.refresh()
			refreshed = time.Now()
		}
		for range floodPPS / 100 {
			f.send(i % 8)
			i++
		}
	}
}

// sender is an address on the uplinks' subnet (not a VTEP's) or off it (198.18.0.0/15).
func (f *flooder) sender(onLink bool) netip.Addr {
	if v := f.rng.Uint32N(1 << 17); !onLink {
		return netip.AddrFrom4([4]byte{198, 18 + byte(v>>16), byte(v >> 8), byte(v)})
	}
	return netip.AddrFrom4([4]byte{192, 0, 2, byte(4 + f.rng.IntN(250))})
}

func (f *flooder) send(kind int) {
	node, onLink := f.rng.IntN(3), kind%2 == 0
	port := func() uint16 { return uint16(1024 + f.rng.IntN(60000)) }
	randMAC := binary.BigEndian.AppendUint64(nil, (f.rng.Uint64()|2<<56)&^(1<<56))[:6] // unicast, locally administered
	var frame []byte
	var name string
	switch kind {
	case 0, 1:
		// ARP requests for a VTEP, broadcast: every node gets them. From the subnet, arp-input
		// learns the sender (with a new MAC each time: the adjacency rewritten, the workers'
		// tables published again), through the bounded learning queue and the table's caps,
		// and the daemon answers. From off it, a counted drop ("arp sender not on a connected
		// subnet"), which checkFloodCounted matches frame for frame on n1.
		name = "arp request"
		frame = ether([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, f.mac, 0x0806, arp(1, randMAC, f.sender(onLink), f.vteps[node]))
		if !onLink {
			f.offLinkToN1++
		}
	case 2, 3:
		// Unsolicited ARP replies to one node: learned as above ("arp reply: neighbour
		// learned") or counted off-link.
		name = "arp reply"
		frame = ether(f.macs[node], f.mac, 0x0806, arp(2, randMAC, f.sender(onLink), f.vteps[node]))
		if !onLink && node == 0 {
			f.offLinkToN1++
		}
	case 4, 5:
		// New UDP flows to a VTEP: udp4-local answers a closed port with an ICMP error, whose
		// rate limits (and, to a source on the subnet, glean's ARP) take the rate; one in four
		// goes to port 4789 with a VNI of no network (vxlan4-input drops and counts it).
		dport, payload := port(), make([]byte, 18)
		if f.rng.IntN(4) == 0 {
			vni := 1000 + f.rng.IntN(1<<20)
			dport, payload = 4789, append([]byte{8, 0, 0, 0, byte(vni >> 16), byte(vni >> 8), byte(vni), 0}, make([]byte, 60)...)
		}
		name, frame = "udp to a vtep", ether(f.macs[node], f.mac, 0x0800, udp4(f.sender(onLink), f.vteps[node], port(), dport, payload))
	default:
		// New flows into a tap pod: VXLAN from a spoofed peer VTEP with blue's VNI and a random
		// inner source (10.1.128.0/17, no pod's): vxlan4-input's tunnel match, the VRF lookup
		// and tap output per frame; the pod's kernel answers with ICMP errors, which come back
		// through tap-input and are dropped in the VRF (no route). No session state is made:
		// this cluster has no services or policies.
		if len(f.targets) == 0 {
			return
		}
		t, v := f.targets[f.rng.IntN(len(f.targets))], f.rng.Uint32N(1<<15)
		inner := ether(t.tunMAC, randMAC, 0x0800, udp4(netip.AddrFrom4([4]byte{10, 1, 128 + byte(v>>8), byte(v)}), t.addr, port(), port(), make([]byte, 18)))
		name = "vxlan to a pod"
		frame = ether(f.macs[t.node], f.mac, 0x0800, udp4(t.src, f.vteps[t.node], port(), 4789, append([]byte{8, 0, 0, 0, 0, 0, 56, 0}, inner...)))
	}
	if _, err := unix.Write(f.fd, frame); err != nil {
		name = "send errors"
	}
	f.Sent[name]++
}

func ether(dst, src []byte, ethertype uint16, payload []byte) []byte {
	f := append(append(append([]byte{}, dst...), src...), byte(ethertype>>8), byte(ethertype))
	f = append(f, payload...)
	return append(f, make([]byte, max(0, 60-len(f)))...)
}

func arp(op byte, sha []byte, spa, tpa netip.Addr) []byte {
	p := append(append([]byte{0, 1, 8, 0, 6, 4, 0, op}, sha...), spa.AsSlice()...)
	return append(append(p, 0, 0, 0, 0, 0, 0), tpa.AsSlice()...)
}

// udp4 puts an IPv4 and a UDP header (no checksum) in front of payload.
func udp4(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	b := make([]byte, 28, 28+len(payload))
	b[0], b[8], b[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(b[2:], uint16(28+len(payload)))
	copy(b[12:], src.AsSlice())
	copy(b[16:], dst.AsSlice())
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(b[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(b[20:], sport)
	binary.BigEndian.PutUint16(b[22:], dport)
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload)))
	return append(b, payload...)
}

// offLinkARP is n1's count of off-link ARP senders, and its uplink's receive errors (frames
// the kernel dropped before the daemon saw them).
func (s *soak) offLinkARP() [2]uint64 {
	errs, err := s.errorCounters(s.sc.n1)
	up, err2 := ifaceOf(s.sc.n1, "uplink")
	if err != nil || err2 != nil {
		s.t.Fatalf("n1's counters: %v %v", err, err2)
	}
	return [2]uint64{errs["arp-input: arp sender not on a connected subnet"], up.RxErrors}
}

// checkFloodCounted: each off-link ARP frame sent to n1 (never restarted) is in its arp-input
// counter, or among its uplink's receive errors.
func (s *soak) checkFloodCounted(f *flooder, before [2]uint64) {
	after := s.offLinkARP()
	counted, dropped := after[0]-before[0], after[1]-before[1]
	s.t.Logf("flood: %d off-link ARP frames to n1; n1 counted %d, its uplink dropped %d frames", f.offLinkToN1, counted, dropped)
	if counted > f.offLinkToN1 || counted+dropped < f.offLinkToN1 {
		s.fail("flood: n1 counted %d off-link ARP senders (and dropped %d frames) of %d sent", counted, dropped, f.offLinkToN1)
	}
}
