package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// runOnce is one run at load l; prof, if set, is the directory for its
// profiles.
func runOnce(ctx context.Context, o Options, l load, prof string) (Result, error) {
	res := Result{Concurrency: l.c, Rate: l.rate, Messages: o.Messages}
	if o.Users <= 0 {
		o.Users = 32
	}
	rg, err := startRig(ctx, o, "parley-bench-", http.HandlerFunc(echoModel), prof)
	if err != nil {
		return res, err
	}
	defer rg.stop()
	if err := rg.settle(ctx, o, &res); err != nil {
		return res, err
	}
	before, err := rg.count(ctx)
	if err != nil {
		return res, err
	}
	if prof != "" {
		rg.p.cmd.Process.Signal(syscall.SIGUSR1)
	}
	d := newDriver(ctx, o, l, rg, &res)
	defer d.client.CloseIdleConnections()
	if err := d.run(); err != nil {
		return res, err
	}
	if err := rg.measure(ctx, o, prof, before, &res); err != nil {
		return res, err
	}
	// Count answers after a grace period, so that a late double is seen.
	time.Sleep(500 * time.Millisecond)
	rg.countAnswers(o, &res)
	return res, nil
}

// rig is what one run measures and what it runs against: Redis, the fake
// model and Slack, and parley serving them.
type rig struct {
	dir   string
	rds   *redisServer
	model *upstream
	fs    *fakeSlack
	slack *upstream
	p     *parleyServer
	stops []func() // in the order started
}

// startRig starts the parts of a run in a temporary folder named from
// dirPrefix, model answering as the model, with extraEnv added to
// parley's environment, each stopped by stop; when one fails, those
// already started are stopped.
func startRig(ctx context.Context, o Options, dirPrefix string, model http.Handler, prof string, extraEnv ...string) (_ *rig, err error) {
	// rg is not the named result: each failure returns nil, and the
	// deferred stop must still see what was started.
	rg := &rig{}
	defer func() {
		if err != nil {
			rg.stop()
		}
	}()
	if rg.dir, err = os.MkdirTemp("", dirPrefix); err != nil {
		return nil, err
	}
	rg.stops = append(rg.stops, func() { os.RemoveAll(rg.dir) })
	if rg.rds, err = startRedis(ctx, rg.dir, o.redisFsync()); err != nil {
		return nil, err
	}
	rg.stops = append(rg.stops, func() { rg.rds.stop() })
	if rg.model, err = startUpstream(model); err != nil {
		return nil, err
	}
	rg.stops = append(rg.stops, rg.model.Close)
	rg.fs = newFakeSlack()
	if rg.slack, err = startUpstream(rg.fs); err != nil {
		return nil, err
	}
	rg.stops = append(rg.stops, rg.slack.Close)
	env := append([]string(nil), extraEnv...)
	if prof != "" {
		if err := os.MkdirAll(prof, 0o755); err != nil {
			return nil, err
		}
		env = append(env, "PARLEY_PROFILE_DIR="+prof)
	}
	if o.NoContext {
		path := filepath.Join(rg.dir, "parley.yaml")
		if err := os.WriteFile(path, []byte("policies:\n  default:\n    context:\n      thread: false\n"), 0o600); err != nil {
			return nil, err
		}
		env = append(env, "PARLEY_CONFIG="+path)
	}
	if rg.p, err = startParley(ctx, o.Parley, rg.dir, rg.rds, rg.model, rg.slack, env); err != nil {
		return nil, err
	}
	rg.stops = append(rg.stops, rg.p.stop)
	return rg, nil
}

// stop stops what startRig started, last first.
func (rg *rig) stop() {
	for i := len(rg.stops) - 1; i >= 0; i-- {
		rg.stops[i]()
	}
	rg.stops = nil
}

// settle measures the idle RSS once start-up has settled (a second with
// nothing to do), then warms the server up.
//
// Warm-up: one message answered before the run, so the run measures a
// server past its first reply (connections open, the thread's writers'
// names cached), as a running server is. The fake Slack answers the
// streaming methods, chat.update and the status line as Slack does, so
// nothing is refused; with the instant model an answer is shown before
// the typing delay and is one plain post.
func (rg *rig) settle(ctx context.Context, o Options, res *Result) error {
	time.Sleep(time.Second)
	rss, err := ParseRSS(readFile(fmt.Sprintf("/proc/%d/status", rg.p.pid())))
	if err != nil {
		return err
	}
	res.IdleRSS, res.IdleRssAnon, res.IdleRssFile = rss.Total, rss.Anon, rss.File
	warm := o.Messages
	if err := warmUp(ctx, rg.p.base, rg.fs, warm, o.Timeout); err != nil {
		return err
	}
	rg.model.conns.Store(0) // start-up calls (auth.test) and the warm-up are not the run's
	rg.slack.conns.Store(0)
	return nil
}

// counters are what a run is measured by, read before it.
type counters struct {
	hooks    Histogram
	hooksErr error
	cpu      uint64     // parley's ticks
	redis    RedisStats // Redis's round trips and commands
	self     uint64     // the bench's ticks
	redisCPU uint64     // Redis's ticks
	machine  CPUTimes
	// slackCalls and slackReads are the fake Slack's Web API calls, and
	// those that read the room.
	slackCalls, slackReads int64
}

// count reads the counters before the run. They are read outside the CPU
// window: the scrape is the bench's work, not the messages'.
func (rg *rig) count(ctx context.Context) (counters, error) {
	var c counters
	var err error
	c.hooks, c.hooksErr = webhookTimes(ctx, rg.p.base)
	if c.cpu, err = pidTicks(rg.p.pid()); err != nil {
		return c, err
	}
	if c.redis, err = rg.rds.stats(ctx); err != nil {
		return c, err
	}
	c.slackCalls, c.slackReads = rg.fs.calls.Load(), rg.fs.reads.Load()
	c.self, _ = pidTicks(os.Getpid())
	c.redisCPU, _ = pidTicks(rg.rds.cmd.Process.Pid)
	if c.machine, err = machineTimes(); err != nil {
		return c, err
	}
	return c, nil
}

// measure reads the counters after the run and sets res's figures from
// what they moved by since before.
func (rg *rig) measure(ctx context.Context, o Options, prof string, before counters, res *Result) error {
	cpu1, err := pidTicks(rg.p.pid())
	if err != nil {
		return err
	}
	if hooks1, err := webhookTimes(ctx, rg.p.base); err == nil && before.hooksErr == nil {
		res.ServerAck = hooks1.Since(before.hooks)
	}
	if prof != "" {
		if err := rg.p.stopProfile(prof); err != nil {
			return err
		}
	}
	self1, _ := pidTicks(os.Getpid())
	redis1, _ := pidTicks(rg.rds.cmd.Process.Pid)
	m1, err := machineTimes()
	if err != nil {
		return err
	}
	s1, err := rg.rds.stats(ctx)
	if err != nil {
		return err
	}
	res.CPUPerMessage = time.Duration(cpu1-before.cpu) * (time.Second / clockTicks) / time.Duration(o.Messages)
	// The INFO that read before is counted in s1, one round trip and one
	// command.
	res.RedisWritesPerMessage = float64(s1.Writes-before.redis.Writes-1) / float64(o.Messages)
	res.RedisCommandsPerMessage = float64(s1.Commands-before.redis.Commands-1) / float64(o.Messages)
	if o.RedisOutage > 0 {
		// The restarted server's counters began again at zero.
		res.RedisWritesPerMessage, res.RedisCommandsPerMessage = -1, -1
	}
	res.ModelConns, res.SlackConns = rg.model.conns.Load(), rg.slack.conns.Load()
	res.SlackCallsPerMessage = float64(rg.fs.calls.Load()-before.slackCalls) / float64(o.Messages)
	res.SlackReadsPerMessage = float64(rg.fs.reads.Load()-before.slackReads) / float64(o.Messages)
	// Other processes: the machine's busy time less parley's, Redis's and
	// the bench's own (load generator and fakes).
	m0, redis0 := before.machine, before.redisCPU
	if m1.Total > m0.Total {
		if redis1 < redis0 { // Redis was restarted: count the new process's time
			redis0 = 0
		}
		ours := float64((cpu1 - before.cpu) + (self1 - before.self) + (redis1 - redis0))
		// /proc/stat counts ticks per CPU; per-process ticks are wall ticks
		// on any CPU, so both are in the same unit.
		res.OtherLoad = max(0, BusyShare(m0, m1)-ours/float64(m1.Total-m0.Total))
	}
	return nil
}

// countAnswers counts the messages the fake Slack saw answered never,
// twice, or in the wrong place.
func (rg *rig) countAnswers(o Options, res *Result) {
	fs := rg.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for id := 0; id < o.Messages; id++ {
		as := fs.answers[id]
		switch {
		case len(as) == 0:
			res.Lost++
		case len(as) > 1:
			res.Doubled++
		}
		for _, a := range as {
			if a.channel != chanOf(id) || a.thread != threadTS(id) {
				res.Misrouted++
				break
			}
		}
	}
	res.Misrouted += fs.stray
}

// driver sends a run's messages and times their acks and answers, and
// takes Redis away halfway for an outage run.
type driver struct {
	ctx    context.Context
	o      Options
	l      load
	rg     *rig
	res    *Result
	client *http.Client
	half   int64

	mu          sync.Mutex
	sent        atomic.Int64
	outstanding map[int]time.Time // acked, not yet answered
	killOnce    sync.Once
	killed      chan struct{}
	restarted   time.Time
	restartErr  error
	atKill      map[int]bool
	firstErr    error
}

func newDriver(ctx context.Context, o Options, l load, rg *rig, res *Result) *driver {
	idle := l.c
	if l.rate > 0 {
		// An open loop has as many webhooks in flight as the rate times
		// their time: keep enough connections that a slow moment opens
		// no new ones.
		idle = 256
	}
	res.E2E = make([]time.Duration, 0, o.Messages)
	res.Ack = make([]time.Duration, 0, o.Messages)
	return &driver{
		ctx: ctx, o: o, l: l, rg: rg, res: res,
		client:      &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: idle}, Timeout: 30 * time.Second},
		half:        int64(o.Messages / 2),
		outstanding: map[int]time.Time{},
		killed:      make(chan struct{}),
	}
}

// run sends every message, closed loop (c senders) or open (rate a
// second), and waits for them.
func (d *driver) run() error {
	var wg sync.WaitGroup
	start := time.Now()
	if d.l.rate > 0 {
		// Message id is due id/rate seconds after the start, however late
		// the ones before it are answered.
		for id := 0; id < d.o.Messages && d.ctx.Err() == nil; id++ {
			select {
			case <-time.After(time.Until(start.Add(time.Duration(id) * time.Second / time.Duration(d.l.rate)))):
			case <-d.ctx.Done():
			}
			wg.Add(1)
			go func() { defer wg.Done(); d.one(id) }()
		}
	} else {
		c := d.l.c
		for k := 0; k < c; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := k; id < d.o.Messages; id += c {
					if !d.one(id) {
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	d.res.Elapsed = time.Since(start)
	if d.o.RedisOutage > 0 {
		<-d.killed
		if d.restartErr != nil {
			return d.restartErr
		}
		d.res.UnansweredAtKill = len(d.atKill)
	}
	return d.firstErr
}

// one sends message id and waits for its answer; false stops its sender.
func (d *driver) one(id int) bool {
	if d.o.RedisOutage > 0 && d.sent.Add(1) == d.half {
		d.killOnce.Do(func() { go d.outage() })
	}
	wait := d.rg.fs.expect(id)
	t0 := time.Now()
	ack, refused, err := post(d.ctx, d.client, d.rg.p.base+"/slack/events", event(id, id%d.o.Users))
	d.mu.Lock()
	d.res.Refused += refused
	if err != nil {
		if d.firstErr == nil {
			d.firstErr = err
		}
		d.mu.Unlock()
		return false
	}
	d.res.Ack = append(d.res.Ack, ack)
	d.outstanding[id] = t0
	d.mu.Unlock()
	select {
	case a := <-wait:
		d.mu.Lock()
		d.res.E2E = append(d.res.E2E, a.at.Sub(t0))
		delete(d.outstanding, id)
		if d.atKill[id] && !d.restarted.IsZero() && a.at.Sub(d.restarted) > d.res.MaxAfterRestart {
			d.res.MaxAfterRestart = a.at.Sub(d.restarted)
		}
		d.mu.Unlock()
	case <-time.After(d.o.Timeout):
	case <-d.ctx.Done():
		return false
	}
	return true
}

// outage kills Redis with the messages in flight noted, and starts it
// again after o.RedisOutage.
func (d *driver) outage() {
	d.mu.Lock()
	d.atKill = map[int]bool{}
	for id := range d.outstanding {
		d.atKill[id] = true
	}
	d.mu.Unlock()
	d.rg.rds.kill()
	time.Sleep(d.o.RedisOutage)
	d.restartErr = d.rg.rds.start(d.ctx)
	d.mu.Lock()
	d.restarted = time.Now()
	d.mu.Unlock()
	close(d.killed)
}
