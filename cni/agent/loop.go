package agent

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"time"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
	"veclane.dev/cni/ipam"
)

// Config is a node agent's configuration.
type Config struct {
	Node    cluster.Node
	Uplinks Uplinks
	// CtlSocket is the daemon's control socket.
	CtlSocket string
	// LeaseTTL is how long the node stays in the cluster after its agent stops renewing.
	LeaseTTL time.Duration
	// Resync is how often the agent reconciles without a change in etcd (a restarted
	// daemon is rebuilt within it).
	Resync time.Duration
	// MaxBackoff bounds the wait between attempts while etcd or the daemon is unreachable.
	MaxBackoff time.Duration
	Log        *slog.Logger
	// Kube, if set, is the Kubernetes API the node's services and policies come from, and
	// DefaultNetwork the veclane network of pods' eth0 (where Services and NetworkPolicies
	// without a network of their own are).
	Kube           KubeSource
	DefaultNetwork string
	// NodeLink, if set, names the network the node itself is linked into (see
	// ensureNodeLink): pods reach the node's address (Node.VTEP), the node the network.
	NodeLink string
	// NodeLinkNetns is the path of the host's network namespace, where the daemon runs and
	// the link's host side is configured; "" is the agent's own (a test gives another).
	NodeLinkNetns string
	// NodeGrace is how long the pods of a node whose lease expired stay routed (see
	// nodeMemory); Run keeps the memory in nodes.
	NodeGrace time.Duration
	// IPAM, if set, is where the node claims its source address in a network whose Services
	// take external flows (sources.go); without it such flows are left out.
	IPAM  *ipam.Allocator
	nodes *nodeMemory
}

// Run registers the node and keeps its daemon in step with the cluster until ctx ends:
// a round on every change in etcd, every Resync, and after every failure once the backoff
// has passed. While etcd is unreachable nothing is changed in the daemon (its forwarding goes
// on as it was); when the node's lease is lost, the node registers again.
func Run(ctx context.Context, s *cluster.Store, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	backoff := newBackoff(cfg.MaxBackoff)
	cfg.nodes = &nodeMemory{}
	var lead *cluster.Leadership
	if cfg.Kube != nil {
		// Every agent campaigns; the leader copies Network resources into etcd.
		lead = s.Campaign(ctx, "network-controller", cfg.Node.Name, cfg.LeaseTTL, log)
	}
	for ctx.Err() == nil {
		reg, err := s.Register(ctx, cfg.Node, cfg.LeaseTTL)
		if err != nil {
			log.Warn("registering the node", "node", cfg.Node.Name, "error", err, "retry_in", backoff.peek())
			backoff.wait(ctx)
			continue
		}
		log.Info("registered", "node", cfg.Node.Name, "vtep", cfg.Node.VTEP, "lease_ttl", cfg.LeaseTTL)
		err = serve(ctx, s, cfg, reg, lead, log, backoff)
		reg.Abandon()
		if err != nil && ctx.Err() == nil {
			log.Warn("the node's lease was lost; registering again", "node", cfg.Node.Name, "error", err)
		}
	}
	return ctx.Err()
}

var errLeaseLost = errors.New("lease lost")

// serve reconciles while the registration holds.
func serve(ctx context.Context, s *cluster.Store, cfg Config, reg *cluster.Registration, lead *cluster.Leadership, log *slog.Logger, backoff *backoff) error {
	var d *Daemon
	var stateful StatefulApplier
	var kubeChanged <-chan struct{}
	if cfg.Kube != nil {
		kubeChanged = cfg.Kube.Changed()
	}
	defer func() {
		if d != nil {
			_ = d.Close()
		}
	}()
	for {
		// A wait cut short by ctx returns as if it had ended: without this, an agent told to
		// stop while the daemon is away would spin here for ever.
		if ctx.Err() != nil {
			return nil
		}
		if d == nil {
			var err error
			if d, err = DialDaemon(cfg.CtlSocket); err != nil {
				log.Warn("connecting to the daemon", "socket", cfg.CtlSocket, "error", err, "retry_in", backoff.peek())
				if !backoff.waitOr(ctx, reg.Lost) {
					return errLeaseLost
				}
				continue
			}
		}
		// The Kubernetes objects, read once for the round: the network controller's pass
		// and the services and policies both work from them.
		var objs *KubeObjects
		var kerr error
		if cfg.Kube != nil {
			objs, kerr = cfg.Kube.Objects()
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if kerr == nil && objs != nil {
			leadNetworks(rctx, s, objs, lead, log)
		}
		round, err := Reconcile(rctx, s, d, &cfg)
		cancel()
		if err == nil && cfg.Kube != nil {
			if err = kerr; err == nil {
				err = applyKube(ctx, s, d, cfg, objs, &stateful, &round)
			}
		}
		if err != nil {
			if !ctl.Refused(err) {
				// The daemon went away (or etcd did): start over with a new connection.
				_ = d.Close()
				d = nil
			}
			log.Warn("reconciling", "error", err, "retry_in", backoff.peek())
			if !backoff.waitOr(ctx, reg.Lost) {
				return errLeaseLost
			}
			continue
		}
		backoff.reset()
		for _, a := range round.Applied {
			log.Info("applied", "action", a.String(), "revision", round.Revision)
		}
		for _, f := range round.Failed {
			log.Warn("refused by the daemon", "action", f)
		}
		for _, p := range round.Problems {
			log.Warn("not applied", "reason", p)
		}
		wctx, stop := context.WithCancel(ctx)
		changed := s.Watch(wctx, round.Revision)
		restarted := watchSocket(wctx, cfg.CtlSocket)
		t := time.NewTimer(cfg.Resync)
		select {
		case <-ctx.Done():
		case <-reg.Lost:
		case <-changed:
		case <-kubeChanged:
		case <-restarted:
			// A new daemon (or none): the next round connects again and rebuilds it.
			log.Info("the daemon's control socket changed: reconnecting", "socket", cfg.CtlSocket)
			_ = d.Close()
			d = nil
		case <-t.C:
		}
		t.Stop()
		stop()
		select {
		case <-reg.Lost:
			return errLeaseLost
		default:
		}
		if ctx.Err() != nil {
			return nil
		}
		// Failed rounds are retried at once on the next change; refused actions every Resync.
	}
}

// applyKube makes the daemon's services and policies what the Kubernetes objects want of
// this node, the pods' interfaces being those of round's attachments, and the local pods'
// routes to the services of their secondary networks (RoutePods); what it did goes into
// round.
func applyKube(ctx context.Context, s *cluster.Store, d *Daemon, cfg Config, objs *KubeObjects, a *StatefulApplier, round *Round) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	sources, problems := ensureSources(sctx, s, cfg.IPAM, cfg.Node.Name, externalNetworks(objs, cfg.DefaultNetwork))
	cancel()
	round.Problems = append(round.Problems, problems...)
	want, problems := DesiredStateful(objs, round.Attachments, cfg.Node.Name, cfg.DefaultNetwork, sources)
	round.Problems = append(round.Problems, problems...)
	applied, failed, err := a.Apply(d, want)
	if err != nil {
		return err
	}
	restored := map[string]bool{}
	for _, x := range round.Applied {
		if x.Kind == "pod-add" {
			restored[x.Pod.ContainerID+"/"+x.Pod.IfName] = true
		}
	}
	routed, problems := a.RoutePods(want, round.Attachments, cfg.Node.Name, cfg.DefaultNetwork, restored)
	round.Problems = append(round.Problems, problems...)
	for _, x := range append(applied, routed...) {
		round.Applied = append(round.Applied, Action{Kind: "kubernetes", Detail: x})
	}
	round.Failed = append(round.Failed, failed...)
	return nil
}

// leadNetworks is the network controller's pass (syncNetworks) when this agent leads it and
// the Network resources are watched; it logs what it did.
func leadNetworks(ctx context.Context, s *cluster.Store, objs *KubeObjects, lead *cluster.Leadership, log *slog.Logger) {
	if lead == nil || !objs.NetworksServed {
		return
	}
	guard, ok := lead.Guard()
	if !ok {
		return
	}
	done, problems, err := syncNetworks(ctx, s, objs.Networks, guard)
	for _, d := range done {
		log.Info("network controller", "applied", d)
	}
	for _, p := range problems {
		log.Warn("network controller", "not applied", p)
	}
	if err != nil {
		log.Warn("network controller", "error", err)
	}
}

// socketCheck is how often the agent looks at the daemon's control socket between rounds.
const socketCheck = time.Second

// watchSocket closes the channel it returns when the control socket at path is gone or is
// another file than now (a restarted daemon makes a new one), looking every socketCheck
// until ctx ends: a restarted daemon is noticed in about a second, not at the next resync.
func watchSocket(ctx context.Context, path string) <-chan struct{} {
	out := make(chan struct{})
	id, ok := socketID(path)
	go func() {
		t := time.NewTicker(socketCheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if now, there := socketID(path); there != ok || now != id {
				close(out)
				return
			}
		}
	}()
	return out
}

// socketID identifies the file at path (device, inode and change time: a file system may
// give a new file the inode number of one just deleted); false if there is none.
func socketID(path string) ([4]uint64, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return [4]uint64{}, false
	}
	return [4]uint64{uint64(st.Dev), st.Ino, uint64(st.Ctim.Sec), uint64(st.Ctim.Nsec)}, true
}

// backoff doubles from 100 ms to a bound.
type backoff struct {
	cur, max time.Duration
}

func newBackoff(max time.Duration) *backoff {
	if max <= 0 {
		max = 10 * time.Second
	}
	return &backoff{cur: 100 * time.Millisecond, max: max}
}

func (b *backoff) peek() time.Duration { return b.cur }
func (b *backoff) reset()              { b.cur = 100 * time.Millisecond }

func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	return d
}

func (b *backoff) wait(ctx context.Context) {
	b.waitOr(ctx, nil)
}

// waitOr waits the next backoff; false if `lost` closed meanwhile.
func (b *backoff) waitOr(ctx context.Context, lost <-chan struct{}) bool {
	t := time.NewTimer(b.next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-lost:
		return false
	case <-t.C:
		return true
	}
}
