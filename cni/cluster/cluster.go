// Package cluster is the cluster's shared state in etcd: the networks (Calico VPP's Network
// resource: name, VNI, range, physical network), the nodes (name and VTEP address, each under
// a lease of its agent, so a node whose agent stops renewing disappears), and the pod
// attachments the CNI plugin records (which pod of which node has which address in which
// network). Every agent reads all three and programs its own daemon from them.
//
//	/veclane/v1/networks/<name>                                   Network
//	/veclane/v1/nodes/<name>                                      Node (under the agent's lease)
//	/veclane/v1/attachments/<network>/<container id>/<ifname>     PodAttachment
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// networkName is the daemon's rule for network names.
var networkName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,31}$`)

// Prefix of every key this package writes.
const Prefix = "/veclane/v1/"

const (
	networksPrefix    = Prefix + "networks/"
	nodesPrefix       = Prefix + "nodes/"
	attachmentsPrefix = Prefix + "attachments/"
)

// Network is an isolated network: its own VRF on every node, carried between nodes by VXLAN
// with its VNI.
type Network struct {
	Name string `json:"name"`
	// VNI is the VXLAN network identifier, 1 to 2^24-1, unique among networks.
	VNI uint32 `json:"vni"`
	// Range is the network's pod addresses (CIDR); networks may share a range.
	Range netip.Prefix `json:"range"`
	// PhysicalNetwork names the uplink the network's tunnels leave by ("" = the node's
	// default uplink), as Calico VPP's physicalNetworkName.
	PhysicalNetwork string `json:"physicalNetworkName,omitempty"`
	// PodRoutes are what a pod's interface on the network may route through veclane besides
	// the range (the default network's pods route 0.0.0.0/0: the node, the API server and the
	// services are reached through it). Empty: the range only.
	PodRoutes []netip.Prefix `json:"podRoutes,omitempty"`
	// Origin says who writes the record: "" an operator (`veclane-agent network add`),
	// OriginKubernetes the network controller, from a Network resource.
	Origin string `json:"origin,omitempty"`
}

// OriginKubernetes marks a network the controller copied from a Network resource: the
// controller replaces and deletes those, and never touches an operator's.
const OriginKubernetes = "kubernetes"

// Validate says what is wrong with a network, if anything.
func (n *Network) Validate() error {
	if !networkName.MatchString(n.Name) {
		return fmt.Errorf("network name %q must be 1 to 31 letters, digits, '-' or '_' (as the daemon's)", n.Name)
	}
	if n.VNI == 0 || n.VNI >= 1<<24 {
		return fmt.Errorf("network %s: vni %d is not in 1..16777215", n.Name, n.VNI)
	}
	if !n.Range.IsValid() || !n.Range.Addr().Is4() {
		return fmt.Errorf("network %s: range %q is not an IPv4 CIDR", n.Name, n.Range)
	}
	if n.Range.Masked() != n.Range {
		return fmt.Errorf("network %s: range %s has host bits set (did you mean %s?)", n.Name, n.Range, n.Range.Masked())
	}
	for _, r := range n.PodRoutes {
		if !r.IsValid() || !r.Addr().Is4() || r.Masked() != r {
			return fmt.Errorf("network %s: pod route %q is not an IPv4 CIDR without host bits", n.Name, r)
		}
	}
	if n.Origin != "" && n.Origin != OriginKubernetes {
		return fmt.Errorf("network %s: origin %q is neither empty nor %q", n.Name, n.Origin, OriginKubernetes)
	}
	return nil
}

// Routable says whether a pod's interface on the network may route prefix r through veclane:
// r lies inside the range or inside one of the pod routes.
func (n *Network) Routable(r netip.Prefix) bool {
	for _, in := range append([]netip.Prefix{n.Range}, n.PodRoutes...) {
		if r.Bits() >= in.Bits() && in.Contains(r.Addr()) {
			return true
		}
	}
	return false
}

// LocalNode is the name of the node a plugin runs on: $VECLANE_NODE, else the host name.
func LocalNode() string {
	if n := os.Getenv("VECLANE_NODE"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
}

// Node is a node of the cluster: where its pods' traffic is tunnelled to.
type Node struct {
	Name string `json:"name"`
	// VTEP is the node's tunnel endpoint: its uplink's address.
	VTEP netip.Addr `json:"vtep"`
}

// Validate says what is wrong with a node, if anything.
func (n *Node) Validate() error {
	if err := checkName("node name", n.Name); err != nil {
		return err
	}
	if !n.VTEP.Is4() {
		return fmt.Errorf("node %s: vtep %q is not an IPv4 address", n.Name, n.VTEP)
	}
	return nil
}

// PodAttachment is one pod interface on a network, as the CNI plugin recorded it.
type PodAttachment struct {
	Network     string     `json:"network"`
	ContainerID string     `json:"containerID"`
	IfName      string     `json:"ifname"`
	Node        string     `json:"node"`
	Address     netip.Addr `json:"address"`
	// Interface is how the pod's interface was made, for its node's agent to make it again
	// after the daemon restarts (absent in records written by hand).
	Interface *PodInterface `json:"interface,omitempty"`
	// Pod is the Kubernetes pod the interface is for, when the runtime said (CNI_ARGS'
	// K8S_POD_NAMESPACE and K8S_POD_NAME): how the agent finds a pod's addresses and
	// interfaces for its services and policies.
	Pod *PodRef `json:"pod,omitempty"`
}

// PodRef names a Kubernetes pod.
type PodRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// PodInterface is a pod interface as the CNI plugin asked the daemon for it.
type PodInterface struct {
	// Kind is "tap" or "memif".
	Kind string `json:"kind"`
	// Netns is the pod's network namespace (a path).
	Netns string `json:"netns"`
	// Name is the interface's name in the daemon.
	Name string `json:"name"`
	// MAC is the daemon's side (the pod's gateway), HostMAC the pod's.
	MAC     string `json:"mac"`
	HostMAC string `json:"hostMac"`
	MTU     uint16 `json:"mtu,omitempty"`
	Queues  uint16 `json:"queues,omitempty"`
	// memif only; Mode "ip" for bare IPv4 packets.
	Mode       string `json:"mode,omitempty"`
	RxMode     string `json:"rxMode,omitempty"`
	Socket     string `json:"socket,omitempty"`
	RingSize   uint32 `json:"ringSize,omitempty"`
	BufferSize uint32 `json:"bufferSize,omitempty"`
	// RegionLimitMiB: the most MiB the pod's regions may take (0: the daemon's default).
	RegionLimitMiB uint32 `json:"regionLimitMiB,omitempty"`
	// Gateway is the pod's next hop; Routes what the pod routes through it.
	Gateway netip.Addr     `json:"gateway"`
	Routes  []netip.Prefix `json:"routes,omitempty"`
	// The daemon takes packets from the pod only from its own address and the prefixes in
	// Forwards (what a pod that routes for others sends from); AnySource turns that off.
	Forwards  []netip.Prefix `json:"forwards,omitempty"`
	AnySource bool           `json:"anySource,omitempty"`
}

// AllowedSources is what the daemon takes from the pod's interface: nil (anything) or the
// pod's address and its Forwards.
func (p *PodAttachment) AllowedSources() *[]netip.Prefix {
	if p.Interface == nil || p.Interface.AnySource {
		return nil
	}
	v := append([]netip.Prefix{netip.PrefixFrom(p.Address, 32)}, p.Interface.Forwards...)
	return &v
}

// Validate says what is wrong with an attachment, if anything.
func (p *PodAttachment) Validate() error {
	for _, f := range []struct{ what, v string }{
		{"network", p.Network}, {"container id", p.ContainerID}, {"interface", p.IfName}, {"node", p.Node},
	} {
		if err := checkName(f.what, f.v); err != nil {
			return err
		}
	}
	if !p.Address.Is4() {
		return fmt.Errorf("attachment %s/%s: address %q is not IPv4", p.ContainerID, p.IfName, p.Address)
	}
	if i := p.Interface; i != nil {
		if i.Kind != "tap" && i.Kind != "memif" {
			return fmt.Errorf("attachment %s/%s: interface kind %q is neither tap nor memif", p.ContainerID, p.IfName, i.Kind)
		}
		if !strings.HasPrefix(i.Netns, "/") || i.Name == "" || !i.Gateway.Is4() {
			return fmt.Errorf("attachment %s/%s: interface needs a namespace path, a name and an IPv4 gateway", p.ContainerID, p.IfName)
		}
	}
	return nil
}

// linkLocal is where the plugin's default gateway (169.254.1.1) lives.
var linkLocal = netip.MustParsePrefix("169.254.0.0/16")

// InNetwork says what of an attachment lies outside network n, if anything: its address must
// be inside n's range, every route routable (inside the range or the network's pod routes,
// Network.Routable), and its gateway link-local (the plugin's default) or inside the range.
// An attachment that passes cannot make a pod's namespace route anything through veclane
// that the network does not allow (a default route only where the network's pod routes hold
// 0.0.0.0/0).
func (p *PodAttachment) InNetwork(n *Network) error {
	where := fmt.Sprintf("attachment %s/%s of network %s (range %s)", p.ContainerID, p.IfName, n.Name, n.Range)
	if !n.Range.Contains(p.Address) {
		return fmt.Errorf("%s: address %s is outside the range", where, p.Address)
	}
	i := p.Interface
	if i == nil {
		return nil
	}
	for _, r := range i.Routes {
		if !n.Routable(r) {
			return fmt.Errorf("%s: route %s is not inside the range nor the network's pod routes %v", where, r, n.PodRoutes)
		}
	}
	if !linkLocal.Contains(i.Gateway) && !n.Range.Contains(i.Gateway) {
		return fmt.Errorf("%s: gateway %s is neither link-local (169.254.0.0/16) nor inside the range", where, i.Gateway)
	}
	return nil
}

func checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if strings.ContainsAny(s, "/ \t\n") {
		return fmt.Errorf("%s %q may not contain '/' or spaces", what, s)
	}
	return nil
}

// Store reads and writes the cluster's state.
type Store struct {
	kv *clientv3.Client
}

// NewStore returns a store over an etcd client.
func NewStore(c *clientv3.Client) *Store { return &Store{kv: c} }

func (s *Store) put(ctx context.Context, key string, v any, opts ...clientv3.OpOption) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := s.kv.Put(ctx, key, string(b), opts...); err != nil {
		return fmt.Errorf("etcd: writing %s: %w", key, err)
	}
	return nil
}

// PutNetwork creates or replaces a network; its VNI must be no other network's. The check
// reads the networks only, and the write is a transaction that fails if any network changed
// since that read (then both are done again), so two writers at once cannot give two
// networks one VNI.
// A guard (Leadership.Guard) must hold too, else ErrNotLeader.
func (s *Store) PutNetwork(ctx context.Context, n Network, guards ...clientv3.Cmp) error {
	if err := n.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	for {
		resp, err := s.kv.Get(ctx, networksPrefix, clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("etcd: reading the networks: %w", err)
		}
		for _, kv := range resp.Kvs {
			o, err := decodeNetwork(kv.Value)
			if err == nil && o.Name != n.Name && o.VNI == n.VNI {
				return fmt.Errorf("network %s: vni %d is network %s's", n.Name, n.VNI, o.Name)
			}
		}
		unchanged := clientv3.Compare(clientv3.ModRevision(networksPrefix).WithPrefix(), "<", resp.Header.Revision+1)
		t, err := s.kv.Txn(ctx).If(append([]clientv3.Cmp{unchanged}, guards...)...).Then(clientv3.OpPut(networksPrefix+n.Name, string(b))).Commit()
		if err != nil {
			return fmt.Errorf("etcd: writing network %s: %w", n.Name, err)
		}
		if t.Succeeded {
			return nil
		}
		if len(guards) > 0 {
			// Which compare failed is not told: the guard alone says whether to go on.
			g, err := s.kv.Txn(ctx).If(guards...).Commit()
			if err != nil {
				return fmt.Errorf("etcd: writing network %s: %w", n.Name, err)
			}
			if !g.Succeeded {
				return ErrNotLeader
			}
		}
	}
}

func decodeNetwork(v []byte) (Network, error) {
	var n Network
	if err := json.Unmarshal(v, &n); err != nil {
		return n, err
	}
	return n, n.Validate()
}

// Network reads one network; false if there is none (or none valid) of that name.
func (s *Store) Network(ctx context.Context, name string) (Network, bool, error) {
	r, err := s.kv.Get(ctx, networksPrefix+name)
	if err != nil {
		return Network{}, false, fmt.Errorf("etcd: reading network %s: %w", name, err)
	}
	if len(r.Kvs) == 0 {
		return Network{}, false, nil
	}
	n, err := decodeNetwork(r.Kvs[0].Value)
	return n, err == nil && n.Name == name, nil
}

// DeleteNetwork removes a network (idempotent), if the guards hold (else ErrNotLeader).
func (s *Store) DeleteNetwork(ctx context.Context, name string, guards ...clientv3.Cmp) error {
	t, err := s.kv.Txn(ctx).If(guards...).Then(clientv3.OpDelete(networksPrefix + name)).Commit()
	if err != nil {
		return fmt.Errorf("etcd: deleting network %s: %w", name, err)
	}
	if !t.Succeeded {
		return ErrNotLeader
	}
	return nil
}

// ErrNotLeader is a guarded write refused: the writer no longer leads its job.
var ErrNotLeader = errors.New("not the leader any more: the write was not made")

// PutAttachment records a pod attachment (the CNI plugin's ADD).
func (s *Store) PutAttachment(ctx context.Context, p PodAttachment) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return s.put(ctx, attachmentKey(p.Network, p.ContainerID, p.IfName), p)
}

// DeleteAttachment removes a pod attachment (DEL; idempotent).
func (s *Store) DeleteAttachment(ctx context.Context, network, containerID, ifname string) error {
	if _, err := s.kv.Delete(ctx, attachmentKey(network, containerID, ifname)); err != nil {
		return fmt.Errorf("etcd: deleting attachment %s/%s: %w", containerID, ifname, err)
	}
	return nil
}

// HasAttachment says whether a pod attachment is recorded now (a fresh read, for a decision
// that must not rest on an older snapshot).
func (s *Store) HasAttachment(ctx context.Context, network, containerID, ifname string) (bool, error) {
	r, err := s.kv.Get(ctx, attachmentKey(network, containerID, ifname), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("etcd: reading attachment %s/%s: %w", containerID, ifname, err)
	}
	return r.Count > 0, nil
}

func attachmentKey(network, containerID, ifname string) string {
	return attachmentsPrefix + network + "/" + containerID + "/" + ifname
}

// Registration is a node's presence in the cluster, held by its lease.
type Registration struct {
	lease  clientv3.LeaseID
	cancel context.CancelFunc
	// Lost is closed when the lease can no longer be kept alive (etcd unreachable for longer
	// than the TTL, or the lease revoked): the node has left the cluster and must register
	// again.
	Lost <-chan struct{}
}

// Register puts the node under a lease of `ttl` and keeps the lease alive until Close or
// until it is lost. Other nodes remove this node's tunnels and routes once the lease expires
// and their grace for it has passed (the agent's --node-grace).
func (s *Store) Register(ctx context.Context, n Node, ttl time.Duration) (*Registration, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	secs := int64(ttl / time.Second)
	if secs < 1 {
		secs = 1
	}
	g, err := s.kv.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("etcd: a lease for node %s: %w", n.Name, err)
	}
	if err := s.put(ctx, nodesPrefix+n.Name, n, clientv3.WithLease(g.ID)); err != nil {
		return nil, err
	}
	kctx, cancel := context.WithCancel(context.Background())
	ch, err := s.kv.KeepAlive(kctx, g.ID)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("etcd: keeping node %s's lease: %w", n.Name, err)
	}
	lost := make(chan struct{})
	go func() {
		for range ch {
		}
		close(lost)
	}()
	return &Registration{lease: g.ID, cancel: cancel, Lost: lost}, nil
}

// Close stops renewing the lease and revokes it: the node leaves at once.
func (r *Registration) Close(ctx context.Context, s *Store) error {
	r.cancel()
	if _, err := s.kv.Revoke(ctx, r.lease); err != nil {
		return fmt.Errorf("etcd: revoking the node's lease: %w", err)
	}
	return nil
}

// Abandon stops renewing the lease without revoking it (a crashed agent): the node leaves
// when the lease expires.
func (r *Registration) Abandon() { r.cancel() }

// Snapshot is the whole cluster state at one etcd revision.
type Snapshot struct {
	Revision    int64
	Networks    []Network
	Nodes       []Node
	Attachments []PodAttachment
	// Invalid lists keys whose values could not be read or were refused (see Snapshot), with
	// why: they are ignored, and reported so an operator can fix them.
	Invalid []string
}

// Snapshot reads every network, node and attachment at one revision, sorted by key. A
// record is kept only if it is valid in itself, its key names it (a network or a node under
// its own name, an attachment under its own network, container and interface), and an attachment
// of a network the snapshot holds lies inside that network (InNetwork); every other record
// is listed in Invalid.
func (s *Store) Snapshot(ctx context.Context) (*Snapshot, error) {
	resp, err := s.kv.Get(ctx, Prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: reading the cluster state: %w", err)
	}
	snap := &Snapshot{Revision: resp.Header.Revision}
	var atts []PodAttachment
	var attKeys []string
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		var err error
		switch {
		case strings.HasPrefix(k, networksPrefix):
			var n Network
			if n, err = decodeNetwork(kv.Value); err == nil {
				if want := strings.TrimPrefix(k, networksPrefix); n.Name != want {
					err = fmt.Errorf("the record names network %q but is under network %q's key: refused (a network's name is its key)", n.Name, want)
				} else {
					snap.Networks = append(snap.Networks, n)
				}
			}
		case strings.HasPrefix(k, nodesPrefix):
			var n Node
			if n, err = decodeNode(k, kv.Value); err == nil {
				snap.Nodes = append(snap.Nodes, n)
			}
		case strings.HasPrefix(k, attachmentsPrefix):
			var p PodAttachment
			if p, err = decodeAttachment(k, kv.Value); err == nil {
				atts, attKeys = append(atts, p), append(attKeys, k)
			}
		}
		if err != nil {
			snap.Invalid = append(snap.Invalid, fmt.Sprintf("%s: %v", k, err))
		}
	}
	// Attachments come before networks in etcd's key order: checked once all are read.
	nets := map[string]*Network{}
	for i := range snap.Networks {
		nets[snap.Networks[i].Name] = &snap.Networks[i]
	}
	for i := range atts {
		if n := nets[atts[i].Network]; n != nil {
			if err := atts[i].InNetwork(n); err != nil {
				snap.Invalid = append(snap.Invalid, fmt.Sprintf("%s: %v", attKeys[i], err))
				continue
			}
		}
		snap.Attachments = append(snap.Attachments, atts[i])
	}
	sort.Slice(snap.Networks, func(i, j int) bool { return snap.Networks[i].Name < snap.Networks[j].Name })
	return snap, nil
}

// decodeNode reads the node under key nodes/<name>: a valid node of that name.
func decodeNode(key string, v []byte) (Node, error) {
	var n Node
	if err := json.Unmarshal(v, &n); err != nil {
		return n, err
	}
	if err := n.Validate(); err != nil {
		return n, err
	}
	if want := strings.TrimPrefix(key, nodesPrefix); n.Name != want {
		return n, fmt.Errorf("the record names node %q but is under node %q's key: refused (a node's name is its key)", n.Name, want)
	}
	return n, nil
}

// decodeAttachment reads the attachment under key attachments/<network>/<container>/<ifname>:
// a valid attachment with those three.
func decodeAttachment(key string, v []byte) (PodAttachment, error) {
	var p PodAttachment
	if err := json.Unmarshal(v, &p); err != nil {
		return p, err
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	if want := attachmentKey(p.Network, p.ContainerID, p.IfName); key != want {
		return p, fmt.Errorf("the record is network %s container %s interface %s, whose key is %s: refused (an attachment is its key)", p.Network, p.ContainerID, p.IfName, want)
	}
	return p, nil
}

// Watch returns a channel that receives a value whenever anything under the prefix changes
// after `rev` (the snapshot's revision): the agent then takes a new snapshot. The channel is
// closed when ctx ends or the watch fails (compaction, etcd gone); the caller starts over from
// a new snapshot.
func (s *Store) Watch(ctx context.Context, rev int64) <-chan struct{} {
	out := make(chan struct{}, 1)
	wch := s.kv.Watch(ctx, Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	go func() {
		defer close(out)
		for w := range wch {
			if w.Err() != nil {
				return
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out
}
