package health

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Component states. Paused is not set by Set: it is a running component
// whose pause watcher says it waits for a dependency (Effective).
const (
	Starting   = "starting"
	Running    = "running"
	Paused     = "paused"
	Restarting = "restarting"
	Stopped    = "stopped"
)

// States lists every state a component can be in, for metrics.
var States = []string{Starting, Running, Paused, Restarting, Stopped}

// Component is one component's state.
type Component struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Paused string `json:"paused,omitempty"` // why it waits for a dependency, if it runs and does
	// Halted says why a running component stopped making progress on
	// purpose until an operator acts (a divergence between Kafka and
	// PostgreSQL, a rejected transition): msgx's own words naming the
	// flight and the cause, never a dependency's error text, so readiness
	// may print it.
	Halted      string    `json:"halted,omitempty"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	Restarts    int       `json:"restarts"`
	Since       time.Time `json:"since"`
}

// Effective is the component's exact state: Paused while it runs but waits
// for a dependency, otherwise State.
func (c Component) Effective() string {
	if c.State == Running && (c.Paused != "" || c.Halted != "") {
		return Paused
	}
	return c.State
}

// Registry holds the components' states. The zero value is not usable; use
// NewRegistry.
type Registry struct {
	mu     sync.Mutex
	now    func() time.Time
	comps  map[string]*Component
	paused map[string]func() (bool, string)
	halted map[string]func() string
}

// NewRegistry returns an empty registry reading time from now.
func NewRegistry(now func() time.Time) *Registry {
	return &Registry{now: now, comps: map[string]*Component{}, paused: map[string]func() (bool, string){},
		halted: map[string]func() string{}}
}

func (r *Registry) get(name string) *Component {
	c, ok := r.comps[name]
	if !ok {
		c = &Component{Name: name, State: Starting, Since: r.now()}
		r.comps[name] = c
	}
	return c
}

// Set records a component's state.
func (r *Registry) Set(name, state string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.get(name)
	if c.State != state {
		c.State, c.Since = state, r.now()
	}
}

// Failed records a component's error; it restarts (Restarting).
func (r *Registry) Failed(name string, err error) {
	if r == nil || err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.get(name)
	c.LastError, c.LastErrorAt = err.Error(), r.now()
	c.Restarts++
	if c.State != Restarting {
		c.State, c.Since = Restarting, r.now()
	}
}

// WatchPause registers a function telling whether the component is paused
// by an outage (and why); it is asked on every snapshot.
func (r *Registry) WatchPause(name string, fn func() (bool, string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(name)
	r.paused[name] = fn
}

// WatchHalt registers a function telling why the component halted on purpose
// ("" while it is not); it is asked on every snapshot of a running
// component, like a pause watcher.
func (r *Registry) WatchHalt(name string, fn func() string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(name)
	r.halted[name] = fn
}

// Snapshot returns every component, sorted by name. Pause watchers are
// asked only for running components: a component that stopped (its instance
// lost the process lock) or is restarting is not waiting for anything,
// whatever the pause flag its last run left behind says.
func (r *Registry) Snapshot() []Component {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Component, 0, len(r.comps))
	for name, c := range r.comps {
		cp := *c
		if fn := r.paused[name]; fn != nil && cp.State == Running {
			if p, why := fn(); p {
				cp.Paused = why
			}
		}
		if fn := r.halted[name]; fn != nil && cp.State == Running {
			cp.Halted = fn()
		}
		out = append(out, cp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Check is one readiness probe: nil when the dependency really answers.
type Check func(ctx context.Context) error
