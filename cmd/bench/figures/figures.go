// Package figures turns the bench's printed tables into docs/figures.md.
//
// A bench section prints its figures as tab-separated rows through a
// [Table] (the first row names the columns), exactly as it would through a
// text/tabwriter: the terminal gets the aligned table, and the [Recorder]
// the section writes to keeps the rows. A figure added to any section's
// table therefore lands in figures.md with no second table to edit.
package figures

import (
	"bytes"
	"io"
	"strings"
	"text/tabwriter"
)

// Recorder is the writer the bench's sections print to: it passes
// everything to the terminal and keeps the tables of the current section.
type Recorder struct {
	out      io.Writer
	sections []*Section
}

// Section is one part of the bench (make bench's -only names it).
type Section struct {
	Key, Title string
	Tables     []*Table
	Failed     bool // its run failed: figures.md keeps the section's last good figures
}

// NewRecorder prints to out.
func NewRecorder(out io.Writer) *Recorder { return &Recorder{out: out} }

func (r *Recorder) Write(p []byte) (int, error) { return r.out.Write(p) }

// Section starts section key and prints its title line.
func (r *Recorder) Section(key, title string) *Section {
	s := &Section{Key: key, Title: title}
	r.sections = append(r.sections, s)
	_, _ = io.WriteString(r.out, "== "+title+" ==\n")
	return s
}

// Sections are the sections run, in order.
func (r *Recorder) Sections() []*Section { return r.sections }

// Table is a tabwriter over w whose rows are also kept, when w is a
// Recorder, for figures.md: the first row is the header, each row ends
// with a tab (as text/tabwriter's cells do), an empty cell stays empty.
type Table struct {
	tw      *tabwriter.Writer
	partial []byte
	Rows    [][]string
}

// NewTable returns a table printing to w, aligned as the bench always
// printed (right-aligned, two spaces between columns).
func NewTable(w io.Writer) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)}
	if r, ok := w.(*Recorder); ok && len(r.sections) > 0 {
		s := r.sections[len(r.sections)-1]
		s.Tables = append(s.Tables, t)
	}
	return t
}

func (t *Table) Write(p []byte) (int, error) {
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.row(string(t.partial[:i]))
		t.partial = t.partial[i+1:]
	}
	return t.tw.Write(p)
}

func (t *Table) row(line string) {
	cells := strings.Split(strings.TrimSuffix(line, "\t"), "\t")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	t.Rows = append(t.Rows, cells)
}

// Flush prints the aligned table.
func (t *Table) Flush() error {
	if len(t.partial) > 0 {
		t.row(string(t.partial))
		t.partial = nil
	}
	return t.tw.Flush()
}
