//go:build soak

// TestSoak is `make soak` (docs/cluster.md, "Soak"): cluster_test.go's three nodes for
// $VECLANE_SOAK under everything at once: pings between tap pods across every pair of nodes,
// rounds of `veclane gen` from a memif pod to another, pod churn, kill -9 of agents and
// daemons at seeded random times, ARP and new-flow floods from the underlay, and each
// process's memory and open files sampled every 10 s. Not CI: the build tag keeps `go test
// ./...` from compiling it.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"veclane.dev/cni/ctl"
	"veclane.dev/cni/internal/testbin"
	"veclane.dev/cni/ipam"
)

const (
	sampleEvery  = 10 * time.Second
	pingInterval = 200 * time.Millisecond
	// A restarted node must answer on every ping path through it within recoverWithin of the
	// kill; else it is stuck and the soak ends.
	recoverWithin = 30 * time.Second
	// A restart window runs from a second before the kill (a ping just sent) to the recovery
	// plus windowGrace (pings in flight, the agent's last steps, memif reconnecting).
	windowGrace = 5 * time.Second
	// A restart comes after a gap drawn from [restartGapMin, restartGapMax), on n2 or n3 only:
	// n1's daemon and agent live the whole soak, so that their series span it (elsewhere,
	// with a restart every minute or so, few series outlive their warm-up).
	restartGapMin, restartGapMax = 30 * time.Second, 120 * time.Second
	// None in the last 45 s: the final checks find a settled cluster.
	quietEnd = 45 * time.Second
	// The flood's frames per second, all kinds together: two cores run three debug daemons.
	floodPPS = 2000
	// Flat: after the warm-up (the first 20% of the run, at least 2 minutes, from the series'
	// first sample), the highest sample of the last third is at most the first post-warm-up
	// sample plus rssGrowPct% plus rssGrowKiB, and plus fdGrow open files. That allows what
	// moves without a leak: Go's heap grows to twice its live data between collections,
	// malloc keeps freed arenas, a churned pod's tap and a CNI call's connection hold a few
	// descriptors while they last. In the 48 minutes an hour's run judges, n1's daemon
	// (73 MB) exceeds it by 2 bytes a flood frame, 12 KiB a churn cycle of its own, 300 KiB a
	// peer's restart, or a descriptor a cycle or a restart.
	rssGrowPct, rssGrowKiB, fdGrow = 10, 4096, 8
)

// restart is a kill and what followed; its window runs from a second before the kill to the
// recovery (to, zero until then) plus windowGrace.
type restart struct {
	from, to           time.Time
	Node, Process      string
	At, RecoveredAfter float64 // s
	Stuck              bool
}

type sample struct {
	At          float64 // s since the start
	RSSKiB, FDs int
}

// series is one process's life (a restart starts another). RSSKiB and FDs: first, min, max,
// last.
type series struct {
	Node, Process   string
	Pid             int
	Samples         int
	From, To        float64
	RSSKiB, FDs     [4]int
	Verdict, Detail string
	samples         []sample
}

// nodeStats: learned neighbours (min, max, last), and the error counters of the daemon's
// last sample (counters start again with each life).
type nodeStats struct {
	Neighbours [3]int
	Refused    uint64
	Errors     map[string]uint64
}

type genRound struct {
	from, to  time.Time
	Sent, Got uint64
	Err       string
	// Counted over the round: frames n2 took from m2, n3 put on m3's ring and n3 dropped for
	// want of room there; packets n2 and n3 dropped in ip4-glean; n2's uplink's drops for want
	// of room in the kernel's ring and n3's uplink's receive errors (the kernel's drops); and
	// every error counter that moved, for the failure message.
	In2, Out3, NoRoom3, Glean, Uplinks uint64
	errs, fewErrs                      []string
}

// gleanSample is a daemon's ip4-glean drops at a sample.
type gleanSample struct {
	at    time.Time
	pid   int
	drops uint64
}

// pathResult: each lost ping or frame fell in a restart window of a node on its path (a
// daemon's, else an agent's: the agent is not on the data path, so a loss there is worth a
// look even though it passes), or a daemon counted it dropped, or it is unexplained.
type pathResult struct {
	Path                            string
	Sent, Received, Lost            uint64
	InDaemonRestart, InAgentRestart uint64
	Counted, Unexplained            uint64
}

type soak struct {
	t        *testing.T
	l        *lab
	sc       *scene
	veclane  string
	seed     uint64
	dur      time.Duration
	start    time.Time
	pairs    []*pinger
	blue     []string // each node's blue tap pod's address
	baseline leftovers

	mu       sync.Mutex     // guards the rest
	pids     map[string]int // "n1 daemon" -> pid
	series   []*series
	nodes    map[string]*nodeStats
	gleans   map[string][]gleanSample
	restarts []restart
	rounds   []genRound
	churn    struct{ Cycles, Retried, Failed int }
	paths    []pathResult
	failures []string
}

func TestSoak(t *testing.T) {
	env := os.Getenv("VECLANE_SOAK")
	dur, err := time.ParseDuration(env)
	if env == "" || err != nil || dur < 3*time.Minute {
		t.Fatalf("VECLANE_SOAK=%q: want how long to soak, a Go duration of 3m or more (1h, 10m; the warm-up alone is 2m): %v", env, err)
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("VECLANE_SOAK_SEED"); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("VECLANE_SOAK_SEED=%q: want an unsigned integer", v)
		}
	}
	if os.Getenv("VECLANE_LOG") == "" {
		t.Setenv("VECLANE_LOG", "warn") // the daemons' info lines, five per churn cycle, drown the log
	}
	t.Logf("soak for %v, seed %d (VECLANE_SOAK_SEED=%d draws the same restarts: gaps, nodes, processes)", dur, seed, seed)
	s := setUpSoak(t, newLab(t), dur, seed)
	fl := s.newFlooder(seed)
	arpBefore := s.offLinkARP()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	defer stop()
	s.start = time.Now()
	for _, f := range []func(context.Context){s.sampleLoop, s.genLoop, s.churnLoop, fl.run} {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	s.restartLoop(rand.New(rand.NewPCG(seed, 1)), s.start.Add(dur))
	stop()
	for _, p := range s.pairs {
		p.stop()
	}
	time.Sleep(time.Second) // the flood's last frames reach the counters
	s.sampleOnce()
	s.checkFloodCounted(fl, arpBefore)
	s.finalChecks()
	s.report(fl)
	for _, f := range s.failures {
		t.Error(f)
	}
}

// setUpSoak makes the pods (blue taps b1, b2, b3 on n1, n2, n3; red taps r1, r3; blue memif
// m2, m3), the flood's veth on the bridge, and starts the pings.
func setUpSoak(t *testing.T, l *lab, dur time.Duration, seed uint64) *soak {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc := &scene{l: l, n1: l.nodes[0], n2: l.nodes[1], n3: l.nodes[2], ctx: ctx, st: l.store()}
	sc.networksAndPods(t)
	var b3 string
	b3, sc.rb3 = l.pod(sc.n3, "blue", "b3")
	sc.m2, sc.rm2 = l.pod(sc.n2, "blue-memif", "m2")
	sc.m3, sc.rm3 = l.pod(sc.n3, "blue-memif", "m3")
	s := &soak{t: t, l: l, sc: sc, veclane: veclaneBin(t), seed: seed, dur: dur, pids: map[string]int{}, nodes: map[string]*nodeStats{},
		gleans: map[string][]gleanSample{}}
	s.blue = []string{addr(sc.rb1), addr(sc.rb2), addr(sc.rb3)}
	br := l.tag + "br"
	testbin.Run(t, "ip", "-n", br, "link", "add", "fl0", "type", "veth", "peer", "name", "fl1")
	testbin.Run(t, "ip", "-n", br, "link", "set", "fl1", "master", "br0", "up")
	testbin.Run(t, "ip", "-n", br, "link", "set", "fl0", "up")
	t.Cleanup(func() {
		for _, p := range s.pairs {
			_ = p.cmd.Process.Kill() // the test failed before stopping them
		}
	})
	for _, p := range []struct {
		from, to *node
		ns, name string
		r        podResult
	}{
		{sc.n1, sc.n2, sc.b1, "b1>b2", sc.rb2}, {sc.n2, sc.n3, sc.b2, "b2>b3", sc.rb3},
		{sc.n3, sc.n1, b3, "b3>b1", sc.rb1}, {sc.n1, sc.n3, sc.r1, "r1>r3", sc.rr3},
	} {
		eventually(t, 30*time.Second, p.name+" answers", reaches(p.ns, addr(p.r)))
		pg, err := startPinger(p.name, p.from, p.to, p.ns, addr(p.r))
		if err != nil {
			t.Fatal(err)
		}
		s.pairs = append(s.pairs, pg)
	}
	eventually(t, 30*time.Second, "n2 routes to m3", routed(sc.n2, "blue", addr(sc.rm3)))
	// The memif path's first frames are dropped while its neighbours are resolved.
	if r := s.genRound(2000); r.Err != "" || r.Got == 0 {
		t.Fatalf("the memif path's first round: %+v", r)
	}
	for _, n := range l.nodes {
		s.notePids(n)
	}
	s.baseline = s.leftovers()
	return s
}

func (s *soak) since(t time.Time) float64 { return t.Sub(s.start).Seconds() }

func (s *soak) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.t.Log("FAIL: " + msg)
	s.mu.Lock()
	s.failures = append(s.failures, msg)
	s.mu.Unlock()
}

// inWindow says which process's restart window of the nodes named [from, to] meets: "daemon"
// (if any), "agent", or "".
func (s *soak) inWindow(from, to time.Time, nodes ...string) (proc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.restarts {
		end := w.to
		if end.IsZero() {
			end = time.Now()
		}
		for _, n := range nodes {
			if w.Node == n && !to.Before(w.from.Add(-time.Second)) && !from.After(end.Add(windowGrace)) && proc != "daemon" {
				proc = w.Process
			}
		}
	}
	return proc
}

// notePids records n's daemon's pid (its control socket's peer) and its agent's.
func (s *soak) notePids(n *node) {
	pid := 0
	if c, err := net.Dial("unix", n.sock()); err == nil {
		if raw, err := c.(*net.UnixConn).SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					pid = int(cred.Pid)
				}
			})
		}
		c.Close()
	}
	s.mu.Lock()
	s.pids[n.name+" daemon"], s.pids[n.name+" agent"] = pid, n.agent.Process.Pid
	s.mu.Unlock()
}

// restartLoop kills and restarts a process at random until quietEnd before end. It runs in
// the test's goroutine: startDaemon may fail the test.
func (s *soak) restartLoop(rng *rand.Rand, end time.Time) {
	for {
		at := time.Now().Add(restartGapMin + time.Duration(rng.Int64N(int64(restartGapMax-restartGapMin))))
		n, proc := s.l.nodes[1+rng.IntN(2)], []string{"agent", "daemon"}[rng.IntN(2)]
		if at.After(end.Add(-quietEnd)) {
			time.Sleep(time.Until(end))
			return
		}
		time.Sleep(time.Until(at))
		s.mu.Lock()
		s.restarts = append(s.restarts, restart{from: time.Now(), Node: n.name, Process: proc})
		s.mu.Unlock()
		if proc == "agent" {
			kill(n.agent)
			s.l.startAgent(n)
		} else {
			n.daemon.Kill()
			s.l.startDaemon(n)
		}
		s.notePids(n)
		err := s.waitRecovered(n)
		s.mu.Lock()
		r := &s.restarts[len(s.restarts)-1]
		r.to, r.Stuck = time.Now(), err != nil
		r.At, r.RecoveredAfter = s.since(r.from), r.to.Sub(r.from).Seconds()
		s.mu.Unlock()
		s.t.Logf("restart: %s's %s killed at %.0f s; traffic through %s again %.1f s later", n.name, proc, r.At, n.name, r.RecoveredAfter)
		if err != nil {
			s.fail("stuck: %s's %s killed at %.0f s: not recovered within %v: %v", n.name, proc, r.At, recoverWithin, err)
			return
		}
	}
}

// waitRecovered waits until every ping path through n answers.
func (s *soak) waitRecovered(n *node) error {
	for deadline := time.Now().Add(recoverWithin); ; time.Sleep(200 * time.Millisecond) {
		var err error
		for _, p := range s.pairs {
			if (p.from == n || p.to == n) && err == nil && ping(p.ns, p.dst, 1, "0.2") != 1 {
				err = fmt.Errorf("%s gets no answer", p.name)
			}
		}
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// podIfaces lists n's pod interfaces.
func podIfaces(n *node) ([]string, error) {
	ifs, err := onDaemon(n, (*ctl.Client).Interfaces)
	var names []string
	for _, i := range ifs {
		if i.Pod != nil {
			names = append(names, i.Name)
		}
	}
	return names, err
}

// churnLoop adds a blue tap pod on each node in turn, checks that it reaches the next node's
// blue pod (whose agent must route to it), and deletes it. A failure inside a restart window
// of either node is retried.
func (s *soak) churnLoop(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		n, peer := s.l.nodes[i%3], s.l.nodes[(i+1)%3]
		for ctx.Err() == nil {
			from := time.Now()
			stage, err := s.churnOnce(i, n, peer)
			excused := err != nil && s.inWindow(from, time.Now(), n.name, peer.name) != ""
			s.mu.Lock()
			if err == nil {
				s.churn.Cycles++
			} else if excused {
				s.churn.Retried++
			} else {
				s.churn.Failed++
			}
			s.mu.Unlock()
			if err != nil && !excused {
				s.fail("churn %d on %s at %.0f s: %s: %v", i, n.name, s.since(from), stage, err)
			}
			if !excused {
				time.Sleep(time.Until(from.Add(time.Second))) // at most a cycle a second: two cores
				break
			}
			s.t.Logf("churn %d on %s: %s failed in a restart window; again: %v", i, n.name, stage, err)
			time.Sleep(2 * time.Second)
		}
	}
}

func (s *soak) churnOnce(i int, n, peer *node) (stage string, err error) {
	ns := fmt.Sprintf("%sc%d", s.l.tag, i)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return "netns add", fmt.Errorf("%v: %s", err, out)
	}
	defer func() {
		if err != nil { // leave nothing: DEL succeeds with the daemon down, so retry a while
			for range 30 {
				if _, e := s.l.cnitool(n, "del", "blue", ns); e == nil {
					break
				}
				time.Sleep(time.Second)
			}
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	}()
	_ = exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1").Run()
	out, err := s.l.cnitool(n, "add", "blue", ns)
	if err != nil {
		return "add", err
	}
	var r podResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.IPs) != 1 || len(r.Interfaces) != 2 {
		return "add", fmt.Errorf("result %q: %v", out, err)
	}
	dst := s.blue[(i+1)%3]
	for deadline := time.Now().Add(20 * time.Second); ping(ns, dst, 1, "0.2") != 1; {
		if time.Now().After(deadline) {
			return "reach", fmt.Errorf("%s (%s) gets no answer from %s on %s within 20 s", ns, addr(r), dst, peer.name)
		}
	}
	if _, err := s.l.cnitool(n, "del", "blue", ns); err != nil {
		return "del", err
	}
	if names, err := podIfaces(n); err != nil || slices.Contains(names, r.Interfaces[0].Name) {
		return "del", fmt.Errorf("after DEL, the daemon's pod interfaces are %v (%v)", names, err)
	}
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		return "netns del", fmt.Errorf("%v: %s", err, out)
	}
	return "", nil
}

func (s *soak) sampleLoop(ctx context.Context) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for ; ctx.Err() == nil; <-tick.C {
		s.sampleOnce()
	}
}

// sampleOnce reads each process's VmRSS and open files, each daemon's neighbours, error
// counters and uplink counters, and logs them.
func (s *soak) sampleOnce() {
	now := time.Now()
	at := s.since(now)
	s.mu.Lock()
	pids := maps.Clone(s.pids)
	line := fmt.Sprintf("sample %4.0f s: %d restarts, %d churn cycles, %d memif rounds;", at, len(s.restarts), s.churn.Cycles, len(s.rounds))
	s.mu.Unlock()
	for _, n := range s.l.nodes {
		for _, proc := range []string{"daemon", "agent"} {
			if rss, fds, err := usage(pids[n.name+" "+proc]); err == nil {
				s.addSample(n.name, proc, pids[n.name+" "+proc], sample{at, rss, fds})
				line += fmt.Sprintf(" %s %s %d KiB %d fds;", n.name, proc, rss, fds)
			}
		}
		var neigh struct {
			Neighbors []json.RawMessage
			Totals    struct{ Refused uint64 }
		}
		errs, err := s.errorCounters(n)
		up, err2 := ifaceOf(n, "uplink")
		if err != nil || err2 != nil || s.ctlJSON(n, &neigh, "show", "ip", "neighbors") != nil {
			continue
		}
		k, dropped := len(neigh.Neighbors), uint64(0)
		for _, v := range errs {
			dropped += v
		}
		s.mu.Lock()
		s.gleans[n.name] = append(s.gleans[n.name], gleanSample{now, pids[n.name+" daemon"], gleanDrops(errs)})
		if ns := s.nodes[n.name]; ns != nil {
			ns.Neighbours = [3]int{min(ns.Neighbours[0], k), max(ns.Neighbours[1], k), k}
			ns.Refused, ns.Errors = neigh.Totals.Refused, errs
		} else {
			s.nodes[n.name] = &nodeStats{[3]int{k, k, k}, neigh.Totals.Refused, errs}
		}
		s.mu.Unlock()
		line += fmt.Sprintf(" %s %d neighbours, %d errors counted, uplink rx %d tx %d;", n.name, k, dropped, up.RxPackets, up.TxPackets)
	}
	s.t.Log(line)
}

func (s *soak) ctlJSON(n *node, v any, words ...string) error {
	out, err := exec.Command(s.veclane, append([]string{"ctl", "--socket", n.sock(), "--json"}, words...)...).Output()
	if err != nil {
		return err
	}
	return json.Unmarshal(out, v)
}

// gleanDrops: packets ip4-glean dropped, every one it got (the first of a flow to a neighbour
// not learned yet or forgotten, or one whose adjacency changed on the way).
func gleanDrops(errs map[string]uint64) uint64 {
	var n uint64
	for k, v := range errs {
		if strings.HasPrefix(k, "ip4-glean: ") {
			n += v
		}
	}
	return n
}

// gleaned says whether a daemon of nodes counted a glean drop between the samples around t
// that no other loss was matched with (used holds the matches).
func (s *soak) gleaned(t time.Time, used map[string]uint64, nodes ...string) bool {
	for _, n := range nodes {
		g := s.gleans[n]
		for i := 1; i < len(g); i++ {
			key := fmt.Sprint(n, i)
			if g[i].pid == g[i-1].pid && !t.Before(g[i-1].at.Add(-time.Second)) && !t.After(g[i].at.Add(time.Second)) &&
				g[i].drops-g[i-1].drops > used[key] {
				used[key]++
				return true
			}
		}
	}
	return false
}

// errorCounters is `show errors` as "node: reason" -> count.
func (s *soak) errorCounters(n *node) (map[string]uint64, error) {
	var errs struct {
		Errors []struct {
			Count        uint64
			Node, Reason string
		}
	}
	err := s.ctlJSON(n, &errs, "show", "errors")
	m := map[string]uint64{}
	for _, e := range errs.Errors {
		m[e.Node+": "+e.Reason] += e.Count
	}
	return m, err
}

func usage(pid int) (rssKiB, fds int, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil || pid == 0 {
		return 0, 0, fmt.Errorf("pid %d: %v", pid, err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			fmt.Sscan(v, &rssKiB)
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return rssKiB, len(ents), err
}

func (s *soak) addSample(node, proc string, pid int, sm sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, se := range s.series {
		if se.Node == node && se.Process == proc && se.Pid == pid {
			se.samples = append(se.samples, sm)
			return
		}
	}
	s.series = append(s.series, &series{Node: node, Process: proc, Pid: pid, samples: []sample{sm}})
}

// judge summarises a series and applies the flatness rule (rssGrowPct): "flat", "grew", or
// "short" (under six samples after its warm-up: not judged).
func (s *soak) judge(se *series) {
	f, l := se.samples[0], se.samples[len(se.samples)-1]
	se.Samples, se.From, se.To = len(se.samples), f.At, l.At
	se.RSSKiB, se.FDs = [4]int{f.RSSKiB, f.RSSKiB, 0, l.RSSKiB}, [4]int{f.FDs, f.FDs, 0, l.FDs}
	var post []sample
	for _, sm := range se.samples {
		se.RSSKiB[1], se.RSSKiB[2] = min(se.RSSKiB[1], sm.RSSKiB), max(se.RSSKiB[2], sm.RSSKiB)
		se.FDs[1], se.FDs[2] = min(se.FDs[1], sm.FDs), max(se.FDs[2], sm.FDs)
		if sm.At >= f.At+max(2*time.Minute, s.dur/5).Seconds() {
			post = append(post, sm)
		}
	}
	if se.Verdict = "short"; len(post) < 6 {
		return
	}
	base, top := post[0], sample{}
	for _, sm := range post[len(post)*2/3:] {
		top.RSSKiB, top.FDs = max(top.RSSKiB, sm.RSSKiB), max(top.FDs, sm.FDs)
	}
	se.Verdict = "flat"
	se.Detail = fmt.Sprintf("after warm-up %d KiB %d fds, last third at most %d KiB %d fds", base.RSSKiB, base.FDs, top.RSSKiB, top.FDs)
	if top.RSSKiB > base.RSSKiB*(100+rssGrowPct)/100+rssGrowKiB || top.FDs > base.FDs+fdGrow {
		se.Verdict = "grew"
		s.fail("%s's %s (pid %d) grew: %s (allowed: +%d%% +%d KiB, +%d fds)", se.Node, se.Process, se.Pid, se.Detail, rssGrowPct, rssGrowKiB, fdGrow)
	}
}

// leftovers is what churn must not leave behind: pod interfaces in the daemons, attachments
// and addresses in etcd (the agents' reserved ones aside), churn's namespaces.
type leftovers struct{ Interfaces, Etcd, Namespaces []string }

func (s *soak) leftovers() leftovers {
	var lo leftovers
	for _, n := range s.l.nodes {
		names, err := podIfaces(n)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, name := range names {
			lo.Interfaces = append(lo.Interfaces, n.name+" "+name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := s.l.store().Snapshot(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, a := range snap.Attachments {
		lo.Etcd = append(lo.Etcd, "attachment "+a.ContainerID+" "+a.Address.String())
	}
	for _, network := range []string{"blue", "red"} {
		allocs, err := ipam.New(s.l.etcd.Client(s.t), "").List(ctx, network)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, a := range allocs {
			if !ipam.Reserved(a.Attachment) {
				lo.Etcd = append(lo.Etcd, "address "+network+" "+a.Address.String()+" "+a.ContainerID)
			}
		}
	}
	sort.Strings(lo.Interfaces)
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], s.l.tag+"c") {
			lo.Namespaces = append(lo.Namespaces, f[0])
		}
	}
	return lo
}

// finalChecks: every path answers, a last memif round loses nothing uncounted (a learned
// neighbour expires after an hour unheard: glean), churn left nothing, every loss is
// accounted for, every series is flat.
func (s *soak) finalChecks() {
	for _, p := range s.pairs {
		for deadline := time.Now().Add(recoverWithin); ping(p.ns, p.dst, 1, "0.2") != 1; {
			if time.Now().After(deadline) {
				s.fail("at the end, %s gets no answer within %v", p.name, recoverWithin)
				break
			}
		}
	}
	if r := s.genRound(2000); r.Err != "" || r.Sent != 2000 || r.Got+r.Glean+r.Uplinks < r.Sent {
		s.fail("at the end, a memif round of 2000 frames lost more than n2 and n3 counted: %+v", r)
	}
	now := s.leftovers()
	for what, v := range map[string][2][]string{"pod interfaces": {s.baseline.Interfaces, now.Interfaces},
		"etcd records": {s.baseline.Etcd, now.Etcd}, "churn namespaces": {s.baseline.Namespaces, now.Namespaces}} {
		if fmt.Sprint(v[0]) != fmt.Sprint(v[1]) {
			s.fail("left over: %s %v, were %v before the soak", what, v[1], v[0])
		}
	}
	used := map[string]uint64{}
	for _, p := range s.pairs {
		pr := pathResult{Path: p.name, Sent: uint64(p.sent), Received: uint64(p.got)}
		for _, when := range p.lost() {
			pr.Lost++
			switch w := s.inWindow(when, when, p.from.name, p.to.name); {
			case w == "daemon":
				pr.InDaemonRestart++
			case w == "agent":
				pr.InAgentRestart++
			case s.gleaned(when, used, p.from.name, p.to.name):
				pr.Counted++
				s.t.Logf("%s: the ping sent at %.1f s was lost; matched with a glean drop counted then", p.name, s.since(when))
			default:
				pr.Unexplained++
				s.fail("%s: the ping sent at %.1f s was lost outside any restart window of %s or %s", p.name, s.since(when), p.from.name, p.to.name)
			}
		}
		for _, when := range p.sendErrs {
			if s.inWindow(when, when, p.from.name) == "" {
				s.fail("%s: ping could not send at %.1f s, outside any restart window of %s", p.name, s.since(when), p.from.name)
			}
		}
		if least := int(s.dur/pingInterval) * 9 / 10; p.sent < least {
			s.fail("%s: %d pings sent in %v, fewer than %d: ping stalled", p.name, p.sent, s.dur, least)
		}
		s.paths = append(s.paths, pr)
	}
	s.paths = append(s.paths, s.genAccounting())
	for _, se := range s.series {
		s.judge(se)
	}
	if len(s.restarts) == 0 {
		s.fail("no restart happened")
	}
}

// genAccounting: a round's loss is in a restart window of n2 or n3, or counted: n2 took every
// frame m2 sent, m3 received every one n3 put on its ring, n3 dropped some for want of room
// there, and n2's and n3's glean drops and uplink drops during the round are at least the
// rest; or it is unexplained. The match of the rest is by count over the round, not frame by
// frame: the churn's first packets glean too, and the flood shares the uplinks.
func (s *soak) genAccounting() pathResult {
	g := pathResult{Path: "m2>m3 (memif, gen rounds)"}
	for _, r := range s.rounds {
		lost := r.Sent - min(r.Sent, r.Got)
		g.Sent, g.Received, g.Lost = g.Sent+r.Sent, g.Received+r.Got, g.Lost+lost
		switch w := s.inWindow(r.from, r.to, "n2", "n3"); {
		case r.Err == "" && lost == 0:
		case w == "daemon":
			g.InDaemonRestart += lost
		case w == "agent":
			g.InAgentRestart += lost
		case r.Err == "" && r.In2 == r.Sent && r.Out3 == r.Got && lost >= r.NoRoom3 && lost-r.NoRoom3 <= r.Glean+r.Uplinks:
			g.Counted += lost
		default:
			g.Unexplained += lost
			s.fail("memif round at %.0f s: sent %d, received %d, outside any restart window of n2 or n3, and not counted (n2 took %d, n3 put %d on m3's ring; %s); the error counters that moved: %s",
				s.since(r.from), r.Sent, r.Got, r.In2, r.Out3, r.Err, strings.Join(r.errs, "; "))
		}
	}
	return g
}

// report logs the summary as markdown tables, and writes it as JSON to $VECLANE_SOAK_OUT.
func (s *soak) report(f *flooder) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nsoak of %v, seed %d: %d restarts; %d churn cycles (%d retried in restart windows, %d failed); flood at %d frames/s: %v\n",
		s.dur, s.seed, len(s.restarts), s.churn.Cycles, s.churn.Retried, s.churn.Failed, floodPPS, f.Sent)
	b.WriteString("\n| path | sent | received | lost | in a daemon's restart | in an agent's restart | counted by a daemon | unexplained |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range s.paths {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d |\n", p.Path, p.Sent, p.Received, p.Lost, p.InDaemonRestart, p.InAgentRestart, p.Counted, p.Unexplained)
	}
	b.WriteString("\n| at (s) | node | killed | traffic again after (s) |\n|--:|---|---|--:|\n")
	for _, r := range s.restarts {
		fmt.Fprintf(&b, "| %.0f | %s | %s | %.1f%s |\n", r.At, r.Node, r.Process, r.RecoveredAfter, map[bool]string{true: " (stuck)"}[r.Stuck])
	}
	b.WriteString("\n| node | process | pid | from–to (s) | RSS KiB first / max / last | fds first / max / last | verdict |\n|---|---|--:|---|---|---|---|\n")
	for _, se := range s.series {
		fmt.Fprintf(&b, "| %s | %s | %d | %.0f–%.0f | %d / %d / %d | %d / %d / %d | %s |\n", se.Node, se.Process, se.Pid,
			se.From, se.To, se.RSSKiB[0], se.RSSKiB[2], se.RSSKiB[3], se.FDs[0], se.FDs[2], se.FDs[3], se.Verdict)
	}
	b.WriteString("\n| node | learned neighbours min / max / last | refused | error counters (last life) |\n|---|---|--:|--:|\n")
	for _, n := range s.l.nodes {
		if ns := s.nodes[n.name]; ns != nil {
			var total uint64
			for _, v := range ns.Errors {
				total += v
			}
			fmt.Fprintf(&b, "| %s | %d / %d / %d | %d | %d |\n", n.name, ns.Neighbours[0], ns.Neighbours[1], ns.Neighbours[2], ns.Refused, total)
		}
	}
	s.t.Log(b.String())
	out := os.Getenv("VECLANE_SOAK_OUT")
	if out == "" {
		return
	}
	j, err := json.MarshalIndent(map[string]any{
		"date": s.start.UTC().Format(time.RFC3339), "duration": s.dur.String(), "seed": s.seed, "passed": len(s.failures) == 0,
		"rules": map[string]any{"sample_every_s": sampleEvery.Seconds(), "warmup": max(2*time.Minute, s.dur/5).String(),
			"rss_grow_pct": rssGrowPct, "rss_grow_kib": rssGrowKiB, "fd_grow": fdGrow, "recover_within_s": recoverWithin.Seconds(),
			"window_grace_s": windowGrace.Seconds(), "flood_pps": floodPPS},
		"paths": s.paths, "restarts": s.restarts, "churn": s.churn, "flood": f.Sent, "off_link_arp_to_n1": f.offLinkToN1,
		"nodes": s.nodes, "processes": s.series, "failures": s.failures,
	}, "", " ")
	if err == nil {
		err = os.WriteFile(out, append(j, '\n'), 0o644)
	}
	if err != nil {
		s.t.Errorf("writing %s: %v", out, err)
	}
}
