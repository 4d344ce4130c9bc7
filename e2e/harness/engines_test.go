//go:build e2e

package harness

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Both engines give a top-level NaN, ±Infinity and -0 as JSON.stringify
// writes them, and reject a BigInt as it does.
func TestBiDiAndCDPEvalSpecialValues(t *testing.T) {
	for _, k := range []Kind{KindChromium, KindFirefox} {
		t.Run(string(k), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			b, err := Start(ctx, Options{Browser: k})
			require.NoError(t, err)
			t.Cleanup(b.Close)
			tab, err := b.NewTab()
			require.NoError(t, err)
			for expr, want := range map[string]string{`NaN`: "null", `Infinity`: "null", `-Infinity`: "null", `-0`: "0", `undefined`: "null"} {
				raw, err := tab.p.evaluate(ctx, expr)
				require.NoError(t, err, expr)
				require.Equal(t, want, string(raw), expr)
			}
			_, err = tab.p.evaluate(ctx, `10n`)
			require.ErrorIs(t, err, ErrNotJSON)
		})
	}
}
