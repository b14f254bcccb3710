package ipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Prefix is where every allocation lives in etcd:
//
//	PREFIX<network>/ips/<address>                          -> Allocation (JSON)
//	PREFIX<network>/attachments/<container id>/<ifname>    -> <address>
//
// The two keys of an allocation are written and deleted together, in one transaction.
const Prefix = "/veclane/ipam/v1/"

// Attachment is what an address is allocated to: CNI's attachment key.
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

func (a Attachment) check() error {
	if a.ContainerID == "" || a.IfName == "" {
		return fmt.Errorf("an attachment needs a container id and an interface name")
	}
	if strings.ContainsAny(a.ContainerID, "/") || strings.ContainsAny(a.IfName, "/") {
		return fmt.Errorf("container id %q or interface %q contains '/'", a.ContainerID, a.IfName)
	}
	return nil
}

// Allocation is the record of an allocated address.
type Allocation struct {
	Attachment
	Address netip.Addr `json:"address"`
	// Node is the node that allocated it (for operators; not used to decide anything).
	Node      string    `json:"node,omitempty"`
	Allocated time.Time `json:"allocated"`
}

// Lease is what Allocate returns: the address with its subnet and gateway.
type Lease struct {
	Address netip.Prefix
	Gateway netip.Addr
}

// ErrExhausted is returned (wrapped) when a network has no free address left.
var ErrExhausted = errors.New("no free address")

// Allocator hands out addresses of networks from etcd.
type Allocator struct {
	kv   *clientv3.Client
	node string
}

// New returns an allocator that records `node` as the allocating node.
func New(c *clientv3.Client, node string) *Allocator {
	return &Allocator{kv: c, node: node}
}

func ipKey(network string, a netip.Addr) string {
	return Prefix + network + "/ips/" + a.String()
}

func attKey(network string, at Attachment) string {
	return Prefix + network + "/attachments/" + at.ContainerID + "/" + at.IfName
}

// Allocate gives attachment `at` an address of network `cfg.Network`: the one it already has
// (an ADD repeated after a crash gets the same answer), else the lowest free one of the first
// range that has one. The address is claimed with a transaction that succeeds only if neither
// the address nor the attachment has an allocation yet; when another allocator won the race
// for that address, the next one is tried.
func (al *Allocator) Allocate(ctx context.Context, cfg *Config, at Attachment) (Lease, error) {
	if err := at.check(); err != nil {
		return Lease{}, err
	}
	if l, ok, err := al.Lookup(ctx, cfg, at); err != nil || ok {
		return l, err
	}
	used, err := al.used(ctx, cfg.Network)
	if err != nil {
		return Lease{}, err
	}
	for _, r := range cfg.Ranges {
		for v := u32(r.First); ; v++ {
			a := addr(v)
			if !used[a] && !r.excluded(a) {
				won, existing, err := al.claim(ctx, cfg.Network, at, a)
				if err != nil {
					return Lease{}, err
				}
				if existing.IsValid() {
					// The same attachment was allocated concurrently: that is its address.
					return leaseOf(cfg, existing)
				}
				if won {
					return Lease{Address: netip.PrefixFrom(a, r.Prefix.Bits()), Gateway: r.Gateway}, nil
				}
				used[a] = true
			}
			if v == u32(r.Last) {
				break
			}
		}
	}
	return Lease{}, fmt.Errorf("network %s: %w in %s", cfg.Network, ErrExhausted, describe(cfg))
}

// claim writes the allocation of `a` to `at` if neither has one. It returns whether it did,
// and, when it did not because the attachment already has an address, that address.
func (al *Allocator) claim(ctx context.Context, network string, at Attachment, a netip.Addr) (bool, netip.Addr, error) {
	rec, err := json.Marshal(Allocation{Attachment: at, Address: a, Node: al.node, Allocated: time.Now().UTC()})
	if err != nil {
		return false, netip.Addr{}, err
	}
	ik, ak := ipKey(network, a), attKey(network, at)
	resp, err := al.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(ik), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(ak), "=", 0)).
		Then(clientv3.OpPut(ik, string(rec)), clientv3.OpPut(ak, a.String())).
		Else(clientv3.OpGet(ak)).
		Commit()
	if err != nil {
		return false, netip.Addr{}, fmt.Errorf("etcd: claiming %s for %s/%s: %w", a, at.ContainerID, at.IfName, err)
	}
	if resp.Succeeded {
		return true, netip.Addr{}, nil
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		if prev, err := netip.ParseAddr(string(kvs[0].Value)); err == nil {
			return false, prev, nil
		}
	}
	return false, netip.Addr{}, nil
}

// Lookup returns the address attachment `at` has in the network, if any (CNI CHECK).
func (al *Allocator) Lookup(ctx context.Context, cfg *Config, at Attachment) (Lease, bool, error) {
	resp, err := al.kv.Get(ctx, attKey(cfg.Network, at))
	if err != nil {
		return Lease{}, false, fmt.Errorf("etcd: reading the allocation of %s/%s: %w", at.ContainerID, at.IfName, err)
	}
	if len(resp.Kvs) == 0 {
		return Lease{}, false, nil
	}
	a, err := netip.ParseAddr(string(resp.Kvs[0].Value))
	if err != nil {
		return Lease{}, false, fmt.Errorf("etcd: the allocation of %s/%s is not an address: %q", at.ContainerID, at.IfName, resp.Kvs[0].Value)
	}
	l, err := leaseOf(cfg, a)
	return l, err == nil, err
}

func leaseOf(cfg *Config, a netip.Addr) (Lease, error) {
	for _, r := range cfg.Ranges {
		if r.Prefix.Contains(a) {
			return Lease{Address: netip.PrefixFrom(a, r.Prefix.Bits()), Gateway: r.Gateway}, nil
		}
	}
	return Lease{}, fmt.Errorf("network %s: %s was allocated but is in none of its ranges now (%s)", cfg.Network, a, describe(cfg))
}

// Release frees the address of attachment `at`, if it has one: DEL, idempotent. The address
// key is deleted only if it still names this attachment.
func (al *Allocator) Release(ctx context.Context, network string, at Attachment) error {
	if err := at.check(); err != nil {
		return err
	}
	ak := attKey(network, at)
	resp, err := al.kv.Get(ctx, ak)
	if err != nil {
		return fmt.Errorf("etcd: reading the allocation of %s/%s: %w", at.ContainerID, at.IfName, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	kv := resp.Kvs[0]
	ops := []clientv3.Op{clientv3.OpDelete(ak)}
	if a, err := netip.ParseAddr(string(kv.Value)); err == nil {
		ik := ipKey(network, a)
		got, err := al.kv.Get(ctx, ik)
		if err != nil {
			return fmt.Errorf("etcd: reading %s: %w", a, err)
		}
		var rec Allocation
		if len(got.Kvs) > 0 && json.Unmarshal(got.Kvs[0].Value, &rec) == nil && rec.Attachment == at {
			ops = append(ops, clientv3.OpDelete(ik))
		}
	}
	// Delete only what was read: a concurrent re-allocation of the attachment is left alone.
	_, err = al.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(ak), "=", kv.ModRevision)).
		Then(ops...).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd: releasing %s/%s: %w", at.ContainerID, at.IfName, err)
	}
	return nil
}

// List returns the network's allocations, by address.
func (al *Allocator) List(ctx context.Context, network string) ([]Allocation, error) {
	resp, err := al.kv.Get(ctx, Prefix+network+"/ips/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: listing network %s: %w", network, err)
	}
	out := make([]Allocation, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var rec Allocation
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			return nil, fmt.Errorf("etcd: %s holds no allocation record: %w", kv.Key, err)
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address.Less(out[j].Address) })
	return out, nil
}

// NodePrefix begins the container id of an address a node agent holds for itself (a node's
// service source address in a network, cni/agent/sources.go), not for a pod: no runtime
// lists it among its valid attachments, so GC leaves it alone.
const NodePrefix = "veclane-node-"

// Reserved reports whether `at` is a node's own attachment (NodePrefix), which GC keeps.
func Reserved(at Attachment) bool { return strings.HasPrefix(at.ContainerID, NodePrefix) }

// GC releases every allocation of the network whose attachment is not in `valid` (CNI GC's
// cni.dev/valid-attachments), and returns the records it released. It also clears the halves
// of allocations a hand edit or an older writer may have left: an address record whose
// attachment key is gone, and an attachment key whose address record is. An allocation made
// after the caller built `valid` would be released too: the runtime runs GC exclusive of ADD.
func (al *Allocator) GC(ctx context.Context, network string, valid []Attachment) ([]Allocation, error) {
	keep := make(map[Attachment]bool, len(valid))
	for _, v := range valid {
		keep[v] = true
	}
	ips, err := al.kv.Get(ctx, Prefix+network+"/ips/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: listing network %s: %w", network, err)
	}
	var freed []Allocation
	var errs []error
	for _, kv := range ips.Kvs {
		var rec Allocation
		if json.Unmarshal(kv.Value, &rec) == nil && (keep[rec.Attachment] || Reserved(rec.Attachment)) {
			continue
		}
		if rec.Attachment.check() == nil {
			if err := al.Release(ctx, network, rec.Attachment); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		// Whatever Release left (the record named an attachment whose key was missing or
		// pointed elsewhere, or was unreadable) goes too, unless it changed meanwhile.
		if _, err := al.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).
			Commit(); err != nil {
			errs = append(errs, fmt.Errorf("etcd: deleting %s: %w", kv.Key, err))
			continue
		}
		freed = append(freed, rec)
	}
	p := Prefix + network + "/attachments/"
	atts, err := al.kv.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return freed, errors.Join(append(errs, fmt.Errorf("etcd: listing network %s: %w", network, err))...)
	}
	for _, kv := range atts.Kvs {
		id, ifname, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), p), "/")
		at := Attachment{ContainerID: id, IfName: ifname}
		if !ok || keep[at] || Reserved(at) {
			continue
		}
		if err := al.Release(ctx, network, at); err != nil {
			errs = append(errs, err)
		}
	}
	return freed, errors.Join(errs...)
}

// used returns the network's allocated addresses.
func (al *Allocator) used(ctx context.Context, network string) (map[netip.Addr]bool, error) {
	p := Prefix + network + "/ips/"
	resp, err := al.kv.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("etcd: listing network %s: %w", network, err)
	}
	used := make(map[netip.Addr]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if a, err := netip.ParseAddr(strings.TrimPrefix(string(kv.Key), p)); err == nil {
			used[a] = true
		}
	}
	return used, nil
}

func describe(cfg *Config) string {
	parts := make([]string, 0, len(cfg.Ranges))
	for _, r := range cfg.Ranges {
		parts = append(parts, fmt.Sprintf("%s-%s/%d", r.First, r.Last, r.Prefix.Bits()))
	}
	return strings.Join(parts, ", ")
}
