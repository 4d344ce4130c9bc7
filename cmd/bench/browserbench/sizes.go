package browserbench

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
)

// sizes of tabfence.wasm in bytes; brotli is 0 when not measured.
type sizes struct{ raw, gzip, brotli int }

// measureSizes compresses the runtime as a server would send it: gzip at
// its best level (compress/gzip, as gzip -9) and brotli at quality 11 with
// the brotli CLI when it is on PATH (Debian package brotli).
func measureSizes(distDir, file string) (sizes, error) {
	path := filepath.Join(distDir, file)
	data, err := os.ReadFile(path)
	if err != nil {
		return sizes{}, err
	}
	s := sizes{raw: len(data)}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return sizes{}, err
	}
	if _, err := zw.Write(data); err != nil {
		return sizes{}, err
	}
	if err := zw.Close(); err != nil {
		return sizes{}, err
	}
	s.gzip = buf.Len()
	if bin, err := exec.LookPath("brotli"); err == nil {
		out, err := exec.Command(bin, "-c", "-q", "11", path).Output()
		if err != nil {
			return sizes{}, err
		}
		s.brotli = len(out)
	}
	return s, nil
}
