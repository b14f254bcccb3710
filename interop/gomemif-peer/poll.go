package main

// Replacement for gomemif's Socket.StartPolling.
//
// gomemif v0.1.0 handles control-channel events in a goroutine that it starts
// itself (StartPolling, control_channel.go), so a panic in there kills the
// process. One such panic is easy to trigger: when a client connects and
// closes its socket before sending INIT (a slave that rejects HELLO, a probe,
// a crashed test), controlChannel.handleEvent closes the channel and then
// builds its error with cc.i.GetName(), but cc.i is still nil -> nil
// pointer dereference (control_channel.go, handleEvent, EPOLLHUP and EPOLLERR
// branches). The cleanup is complete by then, so the panic can be
// recovered safely.
//
// This loop is the same as StartPolling's (epoll_wait on the socket's epoll
// fd, one event at a time, skip the wake eventfd, call Socket.handleEvent) but
// calls handleEvent under recover. handleEvent is unexported, hence the
// go:linkname; go.mod pins gomemif to exactly v0.1.0.

import (
	"fmt"
	"reflect"
	"syscall"
	_ "unsafe" // go:linkname

	"go.fd.io/govpp/extras/gomemif/memif"
)

//go:linkname gomemifHandleEvent go.fd.io/govpp/extras/gomemif/memif.(*Socket).handleEvent
func gomemifHandleEvent(s *memif.Socket, ev *syscall.EpollEvent) error

// socketFds returns Socket.epfd and Socket.wakeEvent.Fd.
func socketFds(sock *memif.Socket) (epfd int, wakeFd int32, err error) {
	v := reflect.ValueOf(sock).Elem()
	e := v.FieldByName("epfd")
	w := v.FieldByName("wakeEvent")
	if !e.IsValid() || e.Kind() != reflect.Int || !w.IsValid() || w.Type() != reflect.TypeOf(syscall.EpollEvent{}) {
		return 0, 0, fmt.Errorf("gomemif internals changed: Socket.epfd/wakeEvent not found")
	}
	return int(e.Int()), int32(w.FieldByName("Fd").Int()), nil
}

// pollTimeoutMs bounds how long shutdown waits for the loop.
const pollTimeoutMs = 50

// pollLoop runs until stop is closed, then closes done.
func (p *peer) pollLoop(sock *memif.Socket, epfd int, wakeFd int32, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	var events [1]syscall.EpollEvent
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, err := syscall.EpollWait(epfd, events[:], pollTimeoutMs)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			p.fail(fmt.Errorf("epoll_wait: %v", err))
			return
		}
		for k := 0; k < n; k++ {
			ev := events[k]
			if ev.Fd == wakeFd {
				continue
			}
			if err := p.handleEvent(sock, &ev); err != nil {
				p.logf("gomemif: %v", err)
			}
		}
	}
}

func (p *peer) handleEvent(sock *memif.Socket, ev *syscall.EpollEvent) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if ev.Events&(syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
			err = fmt.Errorf("control channel fd %d closed by the peer before INIT (recovered gomemif panic: %v)", ev.Fd, r)
			return
		}
		// Anything else (for example a slave sending ADD_REGION or CONNECT
		// before INIT, which makes gomemif dereference a nil interface) may
		// leave gomemif in an unknown state: stop and report.
		err = nil
		p.fail(fmt.Errorf("gomemif panicked on fd %d (events %#x): %v", ev.Fd, ev.Events, r))
	}()
	return gomemifHandleEvent(sock, ev)
}
