package wire

// The session check: the outbox names, with every mutation, the user its
// record was enqueued under; the receiver compares it with the user it
// authenticated and refuses a mismatch. Credentials such as cookies follow
// the browser, not the tab, so a tab that has not yet heard of a login in
// another tab could otherwise send one user's records with another user's
// credentials. The header never authorizes anything: the receiver only uses
// it to refuse.

// HeaderClientUser carries the user an outbox record was enqueued under, in
// FormatClientUser's form.
const HeaderClientUser = "X-Client-User"

// ProblemSessionMismatch: the request's X-Client-User is not the
// authenticated user. 403; nothing was stored. The outbox keeps the record
// for its user and holds that user's records until the next login.
const ProblemSessionMismatch = ProblemBase + "session-mismatch"

// OutcomeSession is a 403 whose problem type is ProblemSessionMismatch. The
// status alone says OutcomeTerminal; the outbox refines it from the body.
const OutcomeSession Outcome = 100

// FormatClientUser renders a user id as a header value: printable ASCII
// other than '%' as it is, every other byte as %XX (a header value cannot
// carry control characters, and fetch refuses characters above U+00FF). Both
// sides format and compare the formatted values, so no parser is needed.
func FormatClientUser(u string) string {
	plain := true
	for i := 0; i < len(u) && plain; i++ {
		plain = u[i] > 0x20 && u[i] < 0x7f && u[i] != '%'
	}
	if plain {
		return u
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(u)+8)
	for i := 0; i < len(u); i++ {
		c := u[i]
		if c > 0x20 && c < 0x7f && c != '%' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}
