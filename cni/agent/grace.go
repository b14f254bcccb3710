package agent

import (
	"fmt"
	"sort"
	"time"

	"veclane.dev/cni/cluster"
)

// A node is in the cluster while its agent holds its lease. An agent can be away while its
// daemon still forwards (restarted, upgraded, or cut from etcd for a while): dropping every
// route to that node's pods the moment its lease expires would cut traffic the dataplane
// still carries. So each agent remembers the nodes it has seen, and keeps routing to a node
// whose lease expired for a grace period (Config.NodeGrace) from the moment it first found it
// gone; a node that comes back within it is simply registered again. Routes to the pods of a
// node that is really gone are only late to go: its pods are gone too, and their addresses
// stay allocated until CNI GC releases them, so no other pod answers at them meanwhile. The
// memory is the agent's own: an agent that restarts routes only to registered nodes.

// nodeMemory is what an agent remembers of the nodes it has seen.
type nodeMemory struct {
	seen map[string]rememberedNode
}

type rememberedNode struct {
	node cluster.Node
	// gone is when the node was first found unregistered (zero while registered).
	gone time.Time
}

// withGrace returns the nodes to route to at `now`: the registered ones, and those seen
// before whose lease expired less than grace ago (with a problem each, saying for how long
// still); it forgets nodes past their grace.
func (m *nodeMemory) withGrace(registered []cluster.Node, now time.Time, grace time.Duration) ([]cluster.Node, []string) {
	if m.seen == nil {
		m.seen = map[string]rememberedNode{}
	}
	out := append([]cluster.Node(nil), registered...)
	here := map[string]bool{}
	for _, n := range registered {
		here[n.Name] = true
		m.seen[n.Name] = rememberedNode{node: n}
	}
	var problems []string
	names := make([]string, 0, len(m.seen))
	for name := range m.seen {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := m.seen[name]
		if here[name] {
			continue
		}
		if r.gone.IsZero() {
			r.gone = now
			m.seen[name] = r
		}
		left := grace - now.Sub(r.gone)
		if left <= 0 {
			delete(m.seen, name)
			continue
		}
		out = append(out, r.node)
		problems = append(problems, fmt.Sprintf("node %s: its lease expired %s ago; its pods stay routed (VTEP %s) for %s more (--node-grace)",
			name, now.Sub(r.gone).Round(time.Second), r.node.VTEP, left.Round(time.Second)))
	}
	return out, problems
}
