// Command gomemif-peer is a memif master (listener) built on gomemif
// (go.fd.io/govpp/extras v0.1.0) that echoes every frame it receives back to
// the slave on the same queue pair. It is an interop peer for veclane's
// tests; see README.md for what it can and cannot echo and why.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.fd.io/govpp/extras/gomemif/memif"
)

type config struct {
	socket     string
	id         uint32
	secret     string
	queues     int
	log2Ring   int
	bufferSize int
	maxFrame   int
	exitAfter  uint64
	rxMode     string
	linger     time.Duration
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("gomemif-peer", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var id uint64
	fs.StringVar(&cfg.socket, "socket", "", "control socket path (required); '@name' binds an abstract socket")
	fs.Uint64Var(&id, "id", 0, "memif interface id")
	fs.StringVar(&cfg.secret, "secret", "", "memif secret (at most 24 bytes; empty = none)")
	fs.IntVar(&cfg.queues, "queues", 1, "max queue pairs accepted from the slave (1..255)")
	fs.IntVar(&cfg.log2Ring, "log2-ring", 10, "log2 ring size passed to gomemif (unused by a v0.1.0 master: the slave's ADD_RING decides)")
	fs.IntVar(&cfg.bufferSize, "buffer-size", 2048, "buffer size passed to gomemif (unused by a v0.1.0 master: the slave's descriptors decide)")
	fs.IntVar(&cfg.maxFrame, "max-frame", 10240, "largest frame to echo; longer frames are received and dropped")
	fs.Uint64Var(&cfg.exitAfter, "exit-after", 0, "exit 0 after echoing this many frames (0 = run until SIGTERM/SIGINT)")
	fs.StringVar(&cfg.rxMode, "rx-mode", "interrupt", "wait for frames on the eventfd ('interrupt') or busy-poll ('poll')")
	fs.DurationVar(&cfg.linger, "linger", time.Second, "with -exit-after: how long to wait for the slave to consume the last echoes")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case cfg.socket == "":
		return cfg, errors.New("-socket is required")
	case len(cfg.socket) > 107:
		return cfg, errors.New("-socket path is longer than 107 bytes")
	case id > 0xffffffff:
		return cfg, errors.New("-id must fit in 32 bits")
	case len(cfg.secret) > 24:
		return cfg, errors.New("-secret is longer than 24 bytes")
	case cfg.queues < 1 || cfg.queues > 255:
		return cfg, errors.New("-queues must be in 1..255")
	case cfg.log2Ring < 1 || cfg.log2Ring > 14:
		return cfg, errors.New("-log2-ring must be in 1..14")
	case cfg.bufferSize < 1 || cfg.bufferSize > 0xffff:
		return cfg, errors.New("-buffer-size must be in 1..65535")
	case cfg.maxFrame < 0:
		return cfg, errors.New("-max-frame must be >= 0")
	case cfg.rxMode != "interrupt" && cfg.rxMode != "poll":
		return cfg, errors.New("-rx-mode must be 'interrupt' or 'poll'")
	}
	cfg.id = uint32(id)
	return cfg, nil
}

// prepareSocketPath removes a stale socket file (one nobody listens on), as
// VPP does. gomemif v0.1.0 binds without unlinking, so a leftover file from a
// killed run would make bind fail with EADDRINUSE.
func prepareSocketPath(path string) error {
	if strings.HasPrefix(path, "@") {
		return nil // abstract: no file
	}
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err == nil {
		return fmt.Errorf("%s: another process is listening on it", path)
	}
	return os.Remove(path)
}

// run is the whole program. It returns the process exit code: 0 on a clean
// exit, 2 for setup errors, 3 if the slave broke the protocol.
func run(cfg config, out, errOut io.Writer, stop <-chan struct{}) int {
	p := newPeer(cfg, errOut)
	if err := prepareSocketPath(cfg.socket); err != nil {
		p.logf("error: %v", err)
		return 2
	}
	sock, err := memif.NewSocket("gomemif-peer", cfg.socket)
	if err != nil {
		p.logf("error: NewSocket: %v", err)
		return 2
	}
	args := &memif.Arguments{
		Id:       cfg.id,
		IsMaster: true,
		Mode:     memif.InterfaceModeEthernet,
		Name:     "gomemif-peer",
		MemoryConfig: memif.MemoryConfig{
			NumQueuePairs:    uint16(cfg.queues),
			Log2RingSize:     uint8(cfg.log2Ring),
			PacketBufferSize: uint32(cfg.bufferSize),
		},
		ConnectedFunc:    p.connected,
		DisconnectedFunc: p.disconnected,
		InterruptFunc:    p.interrupt,
	}
	copy(args.Secret[:], cfg.secret)
	// NewInterface binds and listens (master role).
	if _, err := sock.NewInterface(args); err != nil {
		p.logf("error: NewInterface: %v", err)
		return 2
	}

	// Poll gomemif's control events with our own loop instead of
	// sock.StartPolling (see poll.go).
	epfd, wakeFd, err := socketFds(sock)
	if err != nil {
		p.logf("error: %v", err)
		return 2
	}
	pollStop, pollDone := make(chan struct{}), make(chan struct{})
	go p.pollLoop(sock, epfd, wakeFd, pollStop, pollDone)
	fmt.Fprintln(out, "ready")

	code := 0
	select {
	case <-stop:
	case err := <-p.fatal:
		p.logf("error: %v", err)
		code = 3
	case <-p.done:
		deadline := time.Now().Add(cfg.linger)
		for !p.drained() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}

	// Stop the polling loop first so that nothing else touches the
	// interface, then send DISCONNECT, stop the workers (DisconnectedFunc),
	// unmap, close the listener and remove the socket file.
	close(pollStop)
	<-pollDone
	if err := deleteSocket(sock); err != nil {
		p.logf("Delete: %v", err)
	}
	if code == 0 {
		select {
		case err := <-p.fatal:
			p.logf("error: %v", err)
			code = 3
		default:
		}
	}
	line, _ := json.Marshal(p.c.snapshot())
	fmt.Fprintln(out, string(line))
	return code
}

// deleteSocket calls sock.Delete, turning a gomemif panic into an error so
// that the counters are still printed.
func deleteSocket(sock *memif.Socket) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("gomemif panicked: %v", r)
		}
	}()
	return sock.Delete()
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gomemif-peer:", err)
		}
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	stop := make(chan struct{})
	go func() {
		<-sigs
		close(stop)
	}()
	os.Exit(run(cfg, os.Stdout, os.Stderr, stop))
}
