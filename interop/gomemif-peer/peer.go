package main

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.fd.io/govpp/extras/gomemif/memif"
)

// counters are printed as the final JSON line. The first five fields are
// the ones the Rust test suite reads; the rest are diagnostics.
type counters struct {
	RxPackets   atomic.Uint64
	TxPackets   atomic.Uint64
	RxBytes     atomic.Uint64
	TxErrors    atomic.Uint64
	Connections atomic.Uint64
	TxBytes     atomic.Uint64
	RxOversize  atomic.Uint64
	TxAborted   atomic.Uint64
	Disconnects atomic.Uint64
}

type countersSnapshot struct {
	RxPackets   uint64 `json:"rx_packets"`
	TxPackets   uint64 `json:"tx_packets"`
	RxBytes     uint64 `json:"rx_bytes"`
	TxErrors    uint64 `json:"tx_errors"`
	Connections uint64 `json:"connections"`
	TxBytes     uint64 `json:"tx_bytes"`
	RxOversize  uint64 `json:"rx_oversize"`
	TxAborted   uint64 `json:"tx_aborted"`
	Disconnects uint64 `json:"disconnects"`
}

func (c *counters) snapshot() countersSnapshot {
	return countersSnapshot{
		RxPackets:   c.RxPackets.Load(),
		TxPackets:   c.TxPackets.Load(),
		RxBytes:     c.RxBytes.Load(),
		TxErrors:    c.TxErrors.Load(),
		Connections: c.Connections.Load(),
		TxBytes:     c.TxBytes.Load(),
		RxOversize:  c.RxOversize.Load(),
		TxAborted:   c.TxAborted.Load(),
		Disconnects: c.Disconnects.Load(),
	}
}

// pair is one RX queue (S2M ring) reflected to the TX queue (M2S ring) with
// the same index.
type pair struct {
	qid  int
	rxq  *memif.Queue
	txq  *memif.Queue
	rxv  *ringView
	txv  *ringView
	rxFd int
}

// connState lives from ConnectedFunc to DisconnectedFunc.
type connState struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	wake0 chan struct{} // queue 0 wake-ups from gomemif's InterruptFunc
	pairs []*pair
}

type peer struct {
	cfg  config
	logw io.Writer
	logm sync.Mutex
	c    counters

	mu   sync.Mutex
	conn *connState

	done     chan struct{} // closed when -exit-after is reached
	doneOnce sync.Once
	fatal    chan error // protocol violations by the slave
}

func newPeer(cfg config, logw io.Writer) *peer {
	return &peer{cfg: cfg, logw: logw, done: make(chan struct{}), fatal: make(chan error, 1)}
}

func (p *peer) logf(format string, a ...any) {
	p.logm.Lock()
	defer p.logm.Unlock()
	fmt.Fprintf(p.logw, "gomemif-peer: "+format+"\n", a...)
}

func (p *peer) fail(err error) {
	select {
	case p.fatal <- err:
	default:
	}
}

// connected is gomemif's ConnectedFunc. gomemif calls it from its polling
// goroutine while handling CONNECT, after mapping the regions and before
// sending CONNECTED. Returning an error makes gomemif send DISCONNECT.
func (p *peer) connected(i *memif.Interface) error {
	regions, err := gomemifRegions(i)
	if err != nil {
		return err
	}
	var rxqs, txqs []*memif.Queue
	for k := 0; ; k++ {
		q, err := i.GetRxQueue(k)
		if err != nil {
			break
		}
		rxqs = append(rxqs, q)
	}
	for k := 0; ; k++ {
		q, err := i.GetTxQueue(k)
		if err != nil {
			break
		}
		txqs = append(txqs, q)
	}
	n := min(len(rxqs), len(txqs))
	if n == 0 {
		return fmt.Errorf("slave announced %d S2M and %d M2S rings; need at least one of each", len(rxqs), len(txqs))
	}
	if len(rxqs) != len(txqs) {
		p.logf("warning: %d S2M rings but %d M2S rings; only %d queue pairs are reflected", len(rxqs), len(txqs), n)
	}
	cs := &connState{stop: make(chan struct{}), wake0: make(chan struct{}, 1)}
	for k := 0; k < n; k++ {
		rxv, err := queueView(regions, rxqs[k])
		if err != nil {
			return fmt.Errorf("S2M ring %d: %v", k, err)
		}
		txv, err := queueView(regions, txqs[k])
		if err != nil {
			return fmt.Errorf("M2S ring %d: %v", k, err)
		}
		fd, _ := rxqs[k].GetEventFd()
		cs.pairs = append(cs.pairs, &pair{qid: k, rxq: rxqs[k], txq: txqs[k], rxv: rxv, txv: txv, rxFd: fd})
	}

	nconn := p.c.Connections.Add(1)
	sizes := ""
	for k, pr := range cs.pairs {
		if k > 0 {
			sizes += ","
		}
		sizes += fmt.Sprintf("%d/%d", pr.rxv.size, pr.txv.size)
	}
	p.logf("connected #%d: remote app %q, peer interface %q, %d region(s), %d queue pair(s), ring sizes S2M/M2S %s",
		nconn, cstr(i.GetRemoteName()), cstr(i.GetPeerName()), len(regions), n, sizes)

	p.mu.Lock()
	p.conn = cs
	p.mu.Unlock()
	for _, pr := range cs.pairs {
		cs.wg.Add(1)
		go p.worker(cs, pr)
	}
	return nil
}

// disconnected is gomemif's DisconnectedFunc. gomemif unmaps the regions
// right after it returns, so every worker must have stopped touching shared
// memory by then. It must return nil: on error gomemif v0.1.0 abandons the
// teardown and the interface can never connect again.
func (p *peer) disconnected(i *memif.Interface) error {
	p.mu.Lock()
	cs := p.conn
	p.conn = nil
	p.mu.Unlock()
	if cs != nil {
		close(cs.stop)
		cs.wg.Wait()
	}
	if n, err := gomemifDropUnmappedRegions(i); err != nil {
		p.logf("warning: %v", err)
	} else if n > 0 {
		p.logf("worked around gomemif teardown bug: dropped %d unmapped region(s)", n)
	}
	if cs == nil {
		// The handshake failed after INIT; nothing was started.
		p.logf("handshake aborted")
		return nil
	}
	// gomemif keeps the S2M ring 0 eventfd registered in its epoll set; leave
	// it drained so a late signal cannot make its poll loop spin.
	if len(cs.pairs) > 0 {
		drainEventFd(cs.pairs[0].rxFd)
	}
	p.c.Disconnects.Add(1)
	p.logf("disconnected")
	return nil
}

// interrupt is gomemif's InterruptFunc. gomemif v0.1.0 registers only the
// eventfd of S2M ring 0 in its epoll set and calls this from its polling
// goroutine when it is readable. The eventfd is level-triggered and gomemif
// never reads it, so it must be drained here or the poll loop spins.
func (p *peer) interrupt(i *memif.Interface) error {
	q, err := i.GetRxQueue(0)
	if err != nil {
		return nil
	}
	fd, _ := q.GetEventFd()
	drainEventFd(fd)
	p.mu.Lock()
	cs := p.conn
	p.mu.Unlock()
	if cs != nil {
		select {
		case cs.wake0 <- struct{}{}:
		default:
		}
	}
	return nil
}

// idleWait is the longest a worker sleeps without a wake-up. It bounds the
// latency if the slave masks or never sends interrupts.
const idleWait = time.Millisecond

func (p *peer) worker(cs *connState, pr *pair) {
	defer cs.wg.Done()
	buf := make([]byte, max(p.cfg.maxFrame, 1))
	var lastHead uint16 // gomemif's Queue.lastHead starts at 0 as well
	timer := time.NewTimer(idleWait)
	defer timer.Stop()
	idle := 0
	for {
		select {
		case <-cs.stop:
			return
		default:
		}
		st, slots, total, err := pr.rxv.peekPacket(lastHead)
		if err != nil {
			p.fail(fmt.Errorf("queue %d: %v", pr.qid, err))
			return
		}
		if st != peekPacket {
			p.waitRx(cs, pr, timer, &idle)
			continue
		}
		idle = 0
		oversize := total > p.cfg.maxFrame
		var pkt []byte
		if oversize {
			pkt = make([]byte, total) // consumed and dropped
		} else {
			pkt = buf[:total]
		}
		// ReadPacket copies the whole chain into pkt (its chained RX is
		// correct when pkt is large enough) and stores tail = lastHead+slots.
		n, err := pr.rxq.ReadPacket(pkt)
		if err != nil || n != total {
			p.fail(fmt.Errorf("queue %d: gomemif ReadPacket returned (%d, %v) for a %d-byte packet in %d slot(s)",
				pr.qid, n, err, total, slots))
			return
		}
		lastHead += slots
		if t := pr.rxv.tail(); t != lastHead {
			p.fail(fmt.Errorf("queue %d: gomemif released S2M up to %d, expected %d", pr.qid, t, lastHead))
			return
		}
		p.c.RxPackets.Add(1)
		p.c.RxBytes.Add(uint64(n))
		if oversize {
			if k := p.c.RxOversize.Add(1); k <= 10 || k%10000 == 0 {
				p.logf("queue %d: dropped a %d-byte frame, larger than -max-frame %d (%d so far)", pr.qid, n, p.cfg.maxFrame, k)
			}
			continue
		}
		if !p.transmit(cs, pr, pkt) {
			return
		}
	}
}

func (p *peer) waitRx(cs *connState, pr *pair, timer *time.Timer, idle *int) {
	if p.cfg.rxMode == "poll" {
		*idle++
		if *idle < 1000 {
			runtime.Gosched()
			return
		}
		// Even in poll mode, do not burn a core forever while idle.
		*idle = 0
		time.Sleep(50 * time.Microsecond)
		return
	}
	if pr.qid != 0 {
		// Not watched by gomemif: wait on the eventfd directly.
		if waitReadable(pr.rxFd, idleWait) {
			drainEventFd(pr.rxFd)
		}
		return
	}
	timer.Reset(idleWait)
	select {
	case <-cs.stop:
	case <-cs.wake0:
	case <-timer.C:
	}
	timer.Stop()
}

// transmit echoes one frame on the M2S ring of pr. It waits (forever, until
// disconnect) for a free slot so that frames are never dropped for lack of
// space. It returns false if the worker must stop.
func (p *peer) transmit(cs *connState, pr *pair, pkt []byte) bool {
	spins := 0
	for {
		select {
		case <-cs.stop:
			p.c.TxAborted.Add(1)
			return false
		default:
		}
		tail := pr.txv.tail()
		free := pr.txv.head() - tail
		if int(free) > pr.txv.size {
			p.fail(fmt.Errorf("queue %d: M2S head is %d slots ahead of tail %d (ring size %d)", pr.qid, free, tail, pr.txv.size))
			return false
		}
		if free == 0 {
			// The slave has not posted a buffer yet. It does not signal
			// this, so poll with back-off.
			spins++
			if spins < 200 {
				runtime.Gosched()
			} else {
				time.Sleep(20 * time.Microsecond)
			}
			continue
		}
		// gomemif (master) uses the length the slave posted in this
		// descriptor as the buffer capacity.
		d := pr.txv.desc(tail)
		if err := pr.txv.checkBuffer(d, d.length); err != nil {
			p.fail(fmt.Errorf("queue %d: M2S slot %d: %v", pr.qid, tail, err))
			return false
		}
		if uint32(len(pkt)) > d.length {
			// WritePacket would chain and corrupt the frame (it copies
			// pkt[:] into every segment), so do not send it.
			if k := p.c.TxErrors.Add(1); k <= 10 || k%10000 == 0 {
				p.logf("queue %d: not echoing a %d-byte frame: the slave posted a %d-byte M2S buffer and "+
					"gomemif v0.1.0 WritePacket corrupts chained frames (%d so far)", pr.qid, len(pkt), d.length, k)
			}
			return true
		}
		n := pr.txq.WritePacket(pkt)
		if n != len(pkt) || pr.txv.tail() != tail+1 {
			p.fail(fmt.Errorf("queue %d: gomemif WritePacket returned %d for a %d-byte frame (tail %d -> %d)",
				pr.qid, n, len(pkt), tail, pr.txv.tail()))
			return false
		}
		p.c.TxBytes.Add(uint64(n))
		if k := p.c.TxPackets.Add(1); p.cfg.exitAfter > 0 && k >= p.cfg.exitAfter {
			p.doneOnce.Do(func() { close(p.done) })
		}
		return true
	}
}

// drained reports whether the slave has taken back every M2S slot, i.e.
// consumed every echoed frame and refilled the whole ring (true when not
// connected).
func (p *peer) drained() bool {
	// Hold mu while reading shared memory: disconnected takes it before
	// gomemif unmaps the regions.
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.conn
	if cs == nil {
		return true
	}
	for _, pr := range cs.pairs {
		if int(pr.txv.head()-pr.txv.tail()) != pr.txv.size {
			return false
		}
	}
	return true
}

// cstr trims a NUL-padded fixed-size string field.
func cstr(s string) string {
	for k := 0; k < len(s); k++ {
		if s[k] == 0 {
			return s[:k]
		}
	}
	return s
}
