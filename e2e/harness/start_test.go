package harness

import (
	"context"
	"testing"
)

// Start refuses what no engine can do before launching anything.
func TestStartRefusesBadOptions(t *testing.T) {
	if _, err := Start(context.Background(), Options{Browser: "safari"}); err == nil {
		t.Error("Start with an unknown browser: no error")
	}
	if _, err := Start(context.Background(), Options{Browser: KindFirefox, Features: "X"}); err == nil {
		t.Error("Start of Firefox with Chromium Features: no error")
	}
}
