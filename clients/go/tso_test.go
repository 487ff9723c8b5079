//go:build integration

package flurry

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TSO against the fleet's servers, run with --tso: two servers sharing one SQLite registry, so
// one leads the timestamp oracle and the other redirects to it (docs/clients.md, "Timestamps").

func TestTSOSequentialIncrease(t *testing.T) {
	restoreFleet(t)
	tsoLeader(t) // a test before may have killed the leader: wait out the election
	c := newClient(t, Options{})
	var prev uint64
	for i := 0; i < 500; i++ {
		v, err := c.TSO(bg)
		if err != nil {
			t.Fatal(err)
		}
		if v <= prev {
			t.Fatalf("call %d: %d after %d", i, v, prev)
		}
		prev = v
	}
	// Across clients too: a call that begins after another ended gets a larger value.
	eps := endpoints(t)
	a, b := newClient(t, Options{Endpoints: eps[:1]}), newClient(t, Options{Endpoints: eps[1:]})
	for i := 0; i < 50; i++ {
		for _, c := range []*Client{a, b} {
			v, err := c.TSO(bg)
			if err != nil {
				t.Fatal(err)
			}
			if v <= prev {
				t.Fatalf("%d after %d from another client", v, prev)
			}
			prev = v
		}
	}
}

func TestTSOConcurrentCallersShareRequests(t *testing.T) {
	restoreFleet(t)
	leader := tsoLeader(t)
	// Only the leader's proxy: every request passes it and is counted, none is redirected.
	c := newClient(t, Options{Endpoints: endpoints(t)[leader : leader+1]})
	resetStats(t)
	const callers, each = 32, 300
	got := takeConcurrently(t, callers, each, func() (uint64, error) { return c.TSO(bg) })
	checkDistinctIncreasing(t, got)
	s := stats(t, leader).TSO
	if s.MaxInFlight != 1 {
		t.Errorf("%d tso requests in flight at once, want 1", s.MaxInFlight)
	}
	if s.Requests*2 > callers*each {
		t.Errorf("%d tso requests for %d calls: callers did not share requests", s.Requests, callers*each)
	}
	t.Logf("%d calls by %d callers in %d requests", callers*each, callers, s.Requests)
}

// While one request is held at the proxy, 8 more callers arrive: none takes from the held
// request (sent before they called); the next request carries all 8 (count 8).
func TestTSOCallersDuringARequestShareTheNext(t *testing.T) {
	restoreFleet(t)
	leader := tsoLeader(t)
	c := newClient(t, Options{Endpoints: endpoints(t)[leader : leader+1]})
	if _, err := c.TSO(bg); err != nil {
		t.Fatal(err)
	}
	resetStats(t)
	control(t, "POST", fmt.Sprintf("/servers/%d/delay?ms=1000&count=1", leader))
	var held uint64
	var heldErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); held, heldErr = c.TSO(bg) }()
	time.Sleep(200 * time.Millisecond) // the held request is at the proxy now
	late := takeConcurrently(t, 8, 1, func() (uint64, error) { return c.TSO(bg) })
	wg.Wait()
	if heldErr != nil {
		t.Fatal(heldErr)
	}
	if n := stats(t, leader).TSO.Requests; n != 2 {
		t.Errorf("%d tso requests, want 2 (the held one, then one for the 8 callers)", n)
	}
	lo, hi := late[0][0], late[0][0]
	seen := map[uint64]bool{}
	for _, v := range late {
		seen[v[0]] = true
		if v[0] < lo {
			lo = v[0]
		}
		if v[0] > hi {
			hi = v[0]
		}
	}
	if len(seen) != 8 || lo <= held || hi-lo != 7 {
		t.Errorf("the 8 late callers got %v after %d: want 8 consecutive values above it", late, held)
	}
}

func TestTSOFollowsTheRedirectAndKeepsTheLeader(t *testing.T) {
	restoreFleet(t)
	leader := tsoLeader(t)
	follower := 1 - leader
	c := newClient(t, Options{Endpoints: endpoints(t)[follower : follower+1]})
	resetStats(t)
	var prev uint64
	for i := 0; i < 100; i++ {
		v, err := c.TSO(bg)
		if err != nil {
			t.Fatal(err)
		}
		if v <= prev {
			t.Fatalf("%d after %d", v, prev)
		}
		prev = v
	}
	// One request reached the follower (answered 307); the other 99 went to the leader itself.
	if n := stats(t, follower).TSO.Requests; n != 1 {
		t.Errorf("the follower's proxy saw %d tso requests, want 1", n)
	}
}

func TestTSOAfterTheLeaderDiesGoesBackToTheEndpoints(t *testing.T) {
	restoreFleet(t)
	leader := tsoLeader(t)
	follower := 1 - leader
	c := newClient(t, Options{Endpoints: endpoints(t)[follower : follower+1], Timeout: time.Minute})
	before, err := c.TSO(bg) // redirected: the client now asks the leader directly
	if err != nil {
		t.Fatal(err)
	}
	control(t, "POST", fmt.Sprintf("/servers/%d/kill", leader))
	after, err := c.TSO(bg) // the leader refuses connections: the follower, until it leads
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("%d after %d", after, before)
	}
	if got := tsoLeader(t); got != follower {
		t.Errorf("server %d leads, want %d", got, follower)
	}
}
