package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Firefox is the browser the Firefox engine starts unless ExecPath says
// otherwise.
const Firefox = "/usr/bin/firefox-esr"

// firefoxPrefs go into every profile's user.js: no traffic to Mozilla's
// services or anywhere but the test's own servers (remote settings,
// telemetry, DNS prefetch, captive portal and connectivity probes, DNS
// over HTTPS, safe browsing, updates), and no first-run pages.
var firefoxPrefs = map[string]any{
	"services.settings.server":                        "http://127.0.0.1:9/dummy",
	"toolkit.telemetry.enabled":                       false,
	"toolkit.telemetry.unified":                       false,
	"datareporting.policy.dataSubmissionEnabled":      false,
	"datareporting.healthreport.uploadEnabled":        false,
	"network.dns.disablePrefetch":                     true,
	"network.prefetch-next":                           false,
	"network.predictor.enabled":                       false,
	"network.connectivity-service.enabled":            false,
	"network.captive-portal-service.enabled":          false,
	"network.trr.mode":                                5,
	"browser.safebrowsing.malware.enabled":            false,
	"browser.safebrowsing.phishing.enabled":           false,
	"browser.safebrowsing.downloads.enabled":          false,
	"browser.safebrowsing.provider.mozilla.updateURL": "",
	"app.update.disabledForTesting":                   true,
	"app.update.auto":                                 false,
	"extensions.update.enabled":                       false,
	"extensions.getAddons.cache.enabled":              false,
	"extensions.blocklist.enabled":                    false,
	"browser.shell.checkDefaultBrowser":               false,
	"browser.startup.homepage_override.mstone":        "ignore",
	"browser.startup.page":                            0,
	"browser.aboutwelcome.enabled":                    false,
	"browser.newtabpage.enabled":                      false,
	"browser.tabs.warnOnClose":                        false,
	"browser.sessionstore.resume_from_crash":          false,
	"toolkit.startup.max_resumed_crashes":             -1,
	"geo.provider.network.url":                        "",
	"media.gmp-manager.updateEnabled":                 false,
}

// firefoxUnthrottled lift Firefox's background-tab timer clamps (1 s, and
// a time budget) to the 4 ms a foreground tab gets: Options.Throttle false.
var firefoxUnthrottled = map[string]any{
	"dom.min_background_timeout_value":                           4,
	"dom.min_background_timeout_value_without_budget_throttling": 4,
	"dom.timeout.enable_budget_timer_throttling":                 false,
}

// userJS renders prefs as user.js lines.
func userJS(sets ...map[string]any) string {
	var b strings.Builder
	for _, prefs := range sets {
		for k, v := range prefs {
			val := fmt.Sprint(v)
			if s, ok := v.(string); ok {
				val = strconv.Quote(s)
			}
			fmt.Fprintf(&b, "user_pref(%q, %s);\n", k, val)
		}
	}
	return b.String()
}

// bidiListening is the line Firefox's remote agent prints on stderr once
// its WebDriver BiDi server is up (the port is the one the OS picked).
var bidiListening = regexp.MustCompile(`WebDriver BiDi listening on (ws://[0-9.:\[\]a-z]+)`)

// firefoxProcess is a launched Firefox and its temporary profile.
type firefoxProcess struct {
	cmd     *exec.Cmd
	profile string
	exited  chan struct{} // closed once the process has been reaped
	once    sync.Once
}

// launchFirefox starts Firefox headless on a fresh profile and returns it
// with the address of its BiDi session endpoint. ctx bounds the start.
func launchFirefox(ctx context.Context, o Options) (*firefoxProcess, string, error) {
	path := o.ExecPath
	if path == "" {
		path = Firefox
	}
	if _, err := os.Stat(path); err != nil {
		return nil, "", errors.New("harness: no browser at " + path + " (Debian's firefox-esr)")
	}
	dir, err := os.MkdirTemp("", "tabfence-firefox-")
	if err != nil {
		return nil, "", err
	}
	sets := []map[string]any{firefoxPrefs}
	if !o.Throttle {
		sets = append(sets, firefoxUnthrottled)
	}
	if err := os.WriteFile(dir+"/user.js", []byte(userJS(sets...)), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	cmd := exec.Command(path, "--headless", "--no-remote", "--profile", dir, "--remote-debugging-port=0")
	cmd.Env = append(os.Environ(), "MOZ_HEADLESS=1", "MOZ_CRASHREPORTER_DISABLE=1")
	dieWithParent(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("harness: starting firefox: %w", err)
	}
	p := &firefoxProcess{cmd: cmd, profile: dir, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go p.readStderr(stderr, addr)
	go func() { _ = cmd.Wait(); close(p.exited) }()
	select {
	case a := <-addr:
		return p, a + "/session", nil
	case <-p.exited:
		p.stop()
		return nil, "", errors.New("harness: firefox exited before its WebDriver BiDi server was up")
	case <-ctx.Done():
		p.stop()
		return nil, "", fmt.Errorf("harness: starting firefox: %w", ctx.Err())
	}
}

// readStderr finds the BiDi address, then keeps draining stderr: a full
// pipe would stall the browser.
func (p *firefoxProcess) readStderr(r io.Reader, addr chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		if found {
			continue
		}
		if m := bidiListening.FindStringSubmatch(sc.Text()); m != nil {
			found = true
			addr <- m[1]
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// stop kills the process, waits for it and removes the profile.
func (p *firefoxProcess) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
		}
		_ = os.RemoveAll(p.profile)
	})
}

// bidiEngine is one Firefox driven over one WebDriver BiDi session.
type bidiEngine struct {
	proc    *firefoxProcess
	conn    *bidiConn
	first   string // the initial tab's context: the window shared tabs join
	closeMu sync.Once
}

// firefoxStartTimeout bounds the start even when the caller's ctx has no
// deadline: a Firefox that never prints its address fails, not hangs.
var firefoxStartTimeout = 60 * time.Second

// startBiDi launches Firefox and opens its BiDi session. ctx (and
// firefoxStartTimeout) bound the start only; the browser lives until close.
func startBiDi(ctx context.Context, o Options) (engine, error) {
	if o.Features != "" {
		return nil, errors.New("harness: Options.Features is a Chromium flag; Firefox has none")
	}
	ctx, cancel := context.WithTimeout(ctx, firefoxStartTimeout)
	defer cancel()
	proc, url, err := launchFirefox(ctx, o)
	if err != nil {
		return nil, err
	}
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		proc.stop()
		return nil, fmt.Errorf("harness: dialing firefox at %s: %w", url, err)
	}
	e := &bidiEngine{proc: proc, conn: newBiDiConn(ws)}
	// A dead browser must fail calls, not leave them waiting on a socket
	// the kernel has not yet torn down.
	go func() {
		select {
		case <-proc.exited:
			e.conn.close()
		case <-e.conn.done:
		}
	}()
	if err := e.open(ctx); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// open creates the session, subscribes to the events pages wait for, and
// finds the initial tab.
func (e *bidiEngine) open(ctx context.Context) error {
	caps := map[string]any{"capabilities": map[string]any{}}
	if err := e.conn.call(ctx, "session.new", caps, nil); err != nil {
		return fmt.Errorf("harness: firefox session.new: %w", err)
	}
	sub := map[string]any{"events": []string{"browsingContext.contextDestroyed"}}
	if err := e.conn.call(ctx, "session.subscribe", sub, nil); err != nil {
		return err
	}
	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	if err := e.conn.call(ctx, "browsingContext.getTree", map[string]any{"maxDepth": 0}, &tree); err != nil {
		return err
	}
	if len(tree.Contexts) == 0 {
		return errors.New("harness: firefox has no initial tab")
	}
	e.first = tree.Contexts[0].Context
	return nil
}

func (e *bidiEngine) newPage(ctx context.Context, window bool) (pageDriver, error) {
	params := map[string]any{"type": "tab", "referenceContext": e.first}
	if window {
		params = map[string]any{"type": "window"}
	}
	var r struct {
		Context string `json:"context"`
	}
	if err := e.conn.call(ctx, "browsingContext.create", params, &r); err != nil {
		return nil, err
	}
	return &bidiPage{conn: e.conn, id: r.Context}, nil
}

// close ends the session and the process, and removes the profile.
func (e *bidiEngine) close() {
	e.closeMu.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.conn.call(ctx, "browser.close", nil, nil)
		e.conn.close()
		e.proc.stop()
	})
}
