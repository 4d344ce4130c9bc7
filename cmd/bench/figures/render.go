package figures

import (
	"strings"
	"time"
)

// Run says when, where and how the sections were measured.
type Run struct {
	At      time.Time
	Machine string // e.g. "2 cores, Debian GNU/Linux 12, Chromium 156.0.8078.73, go1.26.8"
	Command string // e.g. "go run ./cmd/bench -only memory"
}

const header = "# Figures\n\n" +
	"Written by `make bench` (`cmd/bench`); do not edit by hand. Each section says\n" +
	"when and where it was measured and by which command; how each figure is\n" +
	"measured is in [bench.md](bench.md).\n"

// Render is figures.md with the tables of the sections run, each in the
// place order gives it; a section not run this time, or whose run failed,
// keeps its block from old (the file as it was), so `-only` refreshes one
// section and leaves the others' figures as they were measured.
func Render(run Run, sections []*Section, order []string, old string) string {
	blocks := parseBlocks(old)
	for _, s := range sections {
		if !s.Failed && len(s.Tables) > 0 {
			blocks[s.Key] = renderSection(run, s)
		}
	}
	var b strings.Builder
	b.WriteString(header)
	seen := map[string]bool{}
	for _, k := range order {
		seen[k] = true
		if blk, ok := blocks[k]; ok {
			b.WriteString("\n" + blk)
		}
	}
	for _, k := range blockOrder(old) { // sections this bench no longer has stay until removed by hand
		if !seen[k] {
			seen[k] = true
			b.WriteString("\n" + blocks[k])
		}
	}
	return b.String()
}

func renderSection(run Run, s *Section) string {
	var b strings.Builder
	b.WriteString("<!-- section " + s.Key + " -->\n## " + s.Title + "\n\n")
	b.WriteString("Measured " + run.At.UTC().Format("2006-01-02 15:04 MST") + " on " + run.Machine + ", by `" + run.Command + "`.\n")
	for _, t := range s.Tables {
		if len(t.Rows) == 0 {
			continue
		}
		b.WriteString("\n")
		cols := len(t.Rows[0])
		for i, row := range t.Rows {
			cells := make([]string, cols)
			copy(cells, row)
			if len(row) > cols { // a row wider than its header keeps every cell
				cells = row
			}
			for j, c := range cells {
				cells[j] = strings.ReplaceAll(c, "|", `\|`)
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
			if i == 0 {
				b.WriteString("|" + strings.Repeat(" --- |", cols) + "\n")
			}
		}
	}
	b.WriteString("<!-- end " + s.Key + " -->\n")
	return b.String()
}

// parseBlocks returns old's section blocks by key, markers included.
func parseBlocks(old string) map[string]string {
	out := map[string]string{}
	for _, k := range blockOrder(old) {
		start := strings.Index(old, "<!-- section "+k+" -->")
		end := strings.Index(old[start:], "<!-- end "+k+" -->\n")
		if end < 0 {
			continue
		}
		out[k] = old[start : start+end+len("<!-- end "+k+" -->\n")]
	}
	return out
}

// blockOrder lists old's section keys in the order they appear.
func blockOrder(old string) []string {
	var keys []string
	rest := old
	for {
		i := strings.Index(rest, "<!-- section ")
		if i < 0 {
			return keys
		}
		rest = rest[i+len("<!-- section "):]
		k, _, ok := strings.Cut(rest, " -->")
		if !ok || strings.ContainsAny(k, " \n") {
			continue
		}
		if strings.Contains(old, "<!-- end "+k+" -->\n") {
			keys = append(keys, k)
		}
	}
}
