package figures

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var run = Run{At: time.Date(2026, 12, 1, 15, 40, 0, 0, time.UTC), Machine: "2 cores, Debian, Chromium 156", Command: "go run ./cmd/bench"}

// section prints a table as the bench's sections do, through a Table on
// the Recorder.
func section(r *Recorder, key string, rows ...string) {
	r.Section(key, key+" figures")
	fmt.Fprintln(r, "a line of narrative, not a figure")
	tw := NewTable(r)
	fmt.Fprintln(tw, "figure\ttabfence\traw JS\tmet\t")
	for _, row := range rows {
		fmt.Fprint(tw, row)
	}
	_ = tw.Flush()
}

func TestSectionTableRendersAsMarkdown(t *testing.T) {
	var term bytes.Buffer
	r := NewRecorder(&term)
	section(r, "browser", "failover p95 (ms)\t62.5\t75.8\tyes\t\n", "wasm brotli (KB)\t709\t\tNO\t\n", "a | b\t1\t2\t\t\n")

	assert.Contains(t, term.String(), "== browser figures ==\na line of narrative")
	assert.Regexp(t, `(?m)^ +failover p95 \(ms\) +62\.5 +75\.8  yes$`, term.String(), "the terminal gets the aligned table")

	got := Render(run, r.Sections(), []string{"browser"}, "")
	require.Equal(t, header+`
<!-- section browser -->
## browser figures

Measured 2026-12-01 15:40 UTC on 2 cores, Debian, Chromium 156, by `+"`go run ./cmd/bench`"+`.

| figure | tabfence | raw JS | met |
| --- | --- | --- | --- |
| failover p95 (ms) | 62.5 | 75.8 | yes |
| wasm brotli (KB) | 709 |  | NO |
| a \| b | 1 | 2 |  |
<!-- end browser -->
`, got)
	assert.NotContains(t, got, "narrative")
}

// A run of one section (-only) replaces that section's block and keeps
// the others, in the bench's order; a failed section keeps its last good
// figures.
func TestRenderMergesSections(t *testing.T) {
	r := NewRecorder(&bytes.Buffer{})
	section(r, "browser", "failover\t1\t2\tyes\t\n")
	section(r, "server", "new key\t3400\t\t\t\n")
	section(r, "memory", "heap\t5\t4\t\t\n")
	old := Render(run, r.Sections(), []string{"browser", "memory", "server"}, "")

	again := NewRecorder(&bytes.Buffer{})
	section(again, "memory", "heap\t6\t4\t\t\n")
	failed := again.Section("server", "server figures")
	failed.Failed = true
	later := run
	later.At, later.Command = run.At.Add(time.Hour), "go run ./cmd/bench -only memory"
	got := Render(later, again.Sections(), []string{"browser", "memory", "server"}, old)

	assert.Contains(t, got, "| heap | 6 | 4 |  |")
	assert.NotContains(t, got, "| heap | 5 |")
	assert.Contains(t, got, "| failover | 1 | 2 | yes |", "a section not run keeps its figures")
	assert.Contains(t, got, "| new key | 3400 |", "a failed section keeps its last good figures")
	assert.Contains(t, got, "16:40 UTC on 2 cores, Debian, Chromium 156, by `go run ./cmd/bench -only memory`")
	b, m, s := strings.Index(got, "## browser"), strings.Index(got, "## memory"), strings.Index(got, "## server")
	assert.True(t, b < m && m < s, "sections in the bench's order")
	assert.Equal(t, got, Render(later, nil, []string{"browser", "memory", "server"}, got), "rendering what is there changes nothing")
}
