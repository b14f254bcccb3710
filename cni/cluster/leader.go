package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// leadersPrefix holds one election per cluster-wide job (etcd's concurrency.Election).
const leadersPrefix = Prefix + "leaders/"

// Leadership is a node's campaign to be the one that does a cluster-wide job (the network
// controller): every agent campaigns, one leads at a time, and another takes over within the
// TTL of a leader that stopped. A leader's writes are guarded (Guard): a node that lost the
// lead without knowing yet cannot overwrite its successor's.
type Leadership struct {
	mu    sync.Mutex
	guard *clientv3.Cmp
}

// Campaign campaigns for job as node until ctx ends, on a session of the given TTL.
func (s *Store) Campaign(ctx context.Context, job, node string, ttl time.Duration, log *slog.Logger) *Leadership {
	l := &Leadership{}
	go func() {
		for ctx.Err() == nil {
			if !l.campaign(ctx, s, job, node, ttl, log) {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
	}()
	return l
}

// campaign is one session's campaign; false if it could not be held at all.
func (l *Leadership) campaign(ctx context.Context, s *Store, job, node string, ttl time.Duration, log *slog.Logger) bool {
	sess, err := concurrency.NewSession(s.kv, concurrency.WithTTL(max(1, int(ttl.Seconds()))), concurrency.WithContext(ctx))
	if err != nil {
		return false
	}
	defer func() { _ = sess.Close() }()
	el := concurrency.NewElection(sess, leadersPrefix+job)
	if err := el.Campaign(ctx, node); err != nil {
		return false
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(el.Key()), "=", el.Rev())
	l.set(&cmp)
	log.Info("leading", "job", job, "node", node)
	select {
	case <-sess.Done():
	case <-ctx.Done():
	}
	l.set(nil)
	log.Info("no longer leading", "job", job, "node", node)
	return true
}

func (l *Leadership) set(c *clientv3.Cmp) {
	l.mu.Lock()
	l.guard = c
	l.mu.Unlock()
}

// Guard is the condition a leader's writes carry (its election key is still the one it
// created); false while not leading.
func (l *Leadership) Guard() (clientv3.Cmp, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.guard == nil {
		return clientv3.Cmp{}, false
	}
	return *l.guard, true
}
