package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Cluster is an in-process Kafka cluster of several brokers (kfake) for
// tests that must hold up against what a real cluster does under them:
// partition leaders moving (elections), group and transaction coordinators
// moving, a broker going away and coming back, and requests failing with a
// chosen error. Clients reach it over TCP (Addrs), so a child process (the
// msgx binary) can use it as well as the test's own clients.
//
//	c := testenv.NewCluster(t)                 // three brokers, in memory
//	env = append(env, "MSGX_KAFKA_BROKERS="+strings.Join(c.Addrs(), ","))
//	d := c.Disturb(testenv.Disturbance{Every: 300 * time.Millisecond, Leaders: true, Coordinators: true})
//	… the workload …
//	t.Logf("%+v", d.Stop())                    // what was done to the cluster
//
// Single disturbances: ShuffleLeaders, MoveCoordinators, Down and Up or
// Bounce (a broker unreachable for a while, as in a restart, its data
// kept), Fault (kfake.Fault: fail matching requests, e.g. every EndTxn once
// with COORDINATOR_NOT_AVAILABLE). Kfake gives the underlying kfake.Cluster
// for anything else (ControlKey, MoveTopicPartition, CoordinatorFor, …).
//
// Each broker is advertised behind a Proxy, which is what lets Down cut
// its connections: kfake's own RemoveNode closes a broker's listener but
// not its open connections, on which clients keep asking the removed
// broker, which answers NOT_LEADER_FOR_PARTITION forever. The cluster
// closes when the test ends.
type Cluster struct {
	t       testing.TB
	c       *kfake.Cluster
	proxies []*Proxy // by node ID: kfake numbers its brokers 0, 1, … in listen order
}

// NewCluster starts a cluster of three brokers (kfake.NumBrokers in opts
// changes it) that creates topics with one partition by default, accepts
// records up to 16 MiB and session timeouts from one second, like the
// embedded broker of internal/kafka. Nothing is persisted.
func NewCluster(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	cl := &Cluster{t: t}
	var mu sync.Mutex
	base := []kfake.Opt{
		kfake.NumBrokers(3),
		kfake.DefaultNumPartitions(1),
		kfake.GroupMinSessionTimeout(time.Second),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "16777216"}),
		kfake.ClusterID("testenv-" + strconv.FormatUint(rand.Uint64(), 36)),
		// Every broker listens on a free port and advertises its proxy.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			p := NewProxy(t, ln.Addr().String())
			addr, err := net.ResolveTCPAddr("tcp", p.Addr())
			if err != nil {
				ln.Close()
				return nil, err
			}
			mu.Lock()
			cl.proxies = append(cl.proxies, p)
			mu.Unlock()
			return advertised{Listener: ln, addr: addr}, nil
		}),
	}
	c, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		t.Fatalf("starting a kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	cl.c = c
	return cl
}

// advertised is a broker's listener that kfake advertises under its
// proxy's address.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

// Addrs are the brokers' addresses (host:port), to bootstrap from.
func (c *Cluster) Addrs() []string { return c.c.ListenAddrs() }

// Kfake is the underlying cluster.
func (c *Cluster) Kfake() *kfake.Cluster { return c.c }

// ShuffleLeaders is a leader election on every partition: each gets a
// random leader and its leader epoch is bumped, so producers and consumers
// get NOT_LEADER_FOR_PARTITION and must refresh their metadata.
func (c *Cluster) ShuffleLeaders() { c.c.ShufflePartitionLeaders() }

// MoveCoordinators moves every group and transaction coordinator: clients
// get NOT_COORDINATOR and must find the new one.
func (c *Cluster) MoveCoordinators() { c.c.RehashCoordinators() }

// Down makes broker node unreachable: its connections are cut and new ones
// refused until Up. Its partitions keep it as their leader (a client must
// wait, or the test shuffles the leaders).
func (c *Cluster) Down(node int32) { c.proxy(node).Down() }

// Up makes broker node reachable again.
func (c *Cluster) Up(node int32) { c.proxy(node).Up() }

// Bounce is a broker restart as its clients see it: node is unreachable
// for down, while its partitions elect other leaders, then comes back.
func (c *Cluster) Bounce(node int32, down time.Duration) {
	c.Down(node)
	c.ShuffleLeaders()
	time.Sleep(down)
	c.Up(node)
}

func (c *Cluster) proxy(node int32) *Proxy {
	if node < 0 || int(node) >= len(c.proxies) {
		panic(fmt.Sprintf("testenv.Cluster: no broker %d", node))
	}
	return c.proxies[node]
}

// Fault installs kfake faults: matching requests fail with the fault's
// error (see kfake.Fault for the selectors and Count). Remove them with
// the handle.
func (c *Cluster) Fault(faults ...kfake.Fault) *kfake.FaultHandle { return c.c.Fault(faults...) }

// Disturbance says what Disturb does to the cluster, every Every (default
// 250ms): each round takes the enabled disturbances in turn.
type Disturbance struct {
	Every time.Duration
	// Leaders shuffles the partition leaders; Coordinators moves the
	// coordinators; Bounce restarts a random broker (unreachable for a
	// quarter of Every).
	Leaders, Coordinators, Bounce bool
	// Faults are installed one per round, in turn (each with its Count; 0
	// fails one request).
	Faults []kfake.Fault
	// Seed picks the bounced brokers (0: a fixed seed).
	Seed uint64
}

// Disturbed counts what a Disturber did.
type Disturbed struct {
	Rounds, Leaders, Coordinators, Bounces, Faults int
}

// Disturber disturbs the cluster in the background until Stop.
type Disturber struct {
	stop chan struct{}
	done chan Disturbed
	once sync.Once
	last Disturbed
}

// Disturb starts disturbing the cluster as d says; the test's end stops it.
func (c *Cluster) Disturb(d Disturbance) *Disturber {
	if d.Every <= 0 {
		d.Every = 250 * time.Millisecond
	}
	var kinds []func(*Disturbed)
	if d.Leaders {
		kinds = append(kinds, func(n *Disturbed) { c.ShuffleLeaders(); n.Leaders++ })
	}
	if d.Coordinators {
		kinds = append(kinds, func(n *Disturbed) { c.MoveCoordinators(); n.Coordinators++ })
	}
	rng := rand.New(rand.NewPCG(d.Seed, 0x5eed))
	if d.Bounce {
		kinds = append(kinds, func(n *Disturbed) {
			c.Bounce(int32(rng.IntN(len(c.proxies))), d.Every/4)
			n.Bounces++
		})
	}
	if len(d.Faults) > 0 {
		next := 0
		kinds = append(kinds, func(n *Disturbed) {
			c.Fault(d.Faults[next%len(d.Faults)])
			next++
			n.Faults++
		})
	}
	ds := &Disturber{stop: make(chan struct{}), done: make(chan Disturbed, 1)}
	go func() {
		var n Disturbed
		tick := time.NewTicker(d.Every)
		defer tick.Stop()
		for {
			select {
			case <-ds.stop:
				ds.done <- n
				return
			case <-tick.C:
			}
			for _, k := range kinds {
				k(&n)
			}
			n.Rounds++
		}
	}()
	c.t.Cleanup(func() { ds.Stop() })
	return ds
}

// Stop ends the disturbances and returns what was done; later calls
// return the same.
func (d *Disturber) Stop() Disturbed {
	d.once.Do(func() {
		close(d.stop)
		d.last = <-d.done
	})
	return d.last
}
