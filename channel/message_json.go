package channel

import "strconv"

// AppendMessageJSON appends a delivered message's fields as the JSON of
// the object a subscriber gets, with "payload": null in the payload's place
// (the caller sets the payload, which is not JSON, keeping the field
// order): id, kind, payload, token, seq, resource, owner, sentAt, gap.
func AppendMessageJSON(b []byte, m Message) []byte {
	b = AppendJSONField(b, `{"id":`, m.ID)
	b = AppendJSONField(b, `,"kind":`, m.Kind)
	b = AppendUintField(b, `,"payload":null,"token":`, m.Token)
	b = AppendUintField(b, `,"seq":`, m.Seq)
	b = AppendJSONField(b, `,"resource":`, m.Resource)
	b = AppendJSONField(b, `,"owner":`, m.Owner)
	b = AppendUintField(b, `,"sentAt":`, uint64(m.SentAt))
	b = append(b, `,"gap":`...)
	b = strconv.AppendBool(b, m.Gap)
	return append(b, '}')
}

// AppendReceiptJSON appends what a post resolves to, {id, token, seq}.
func AppendReceiptJSON(b []byte, e Envelope) []byte {
	b = AppendJSONField(b, `{"id":`, e.ID)
	b = AppendUintField(b, `,"token":`, e.Token)
	b = AppendUintField(b, `,"seq":`, e.Seq)
	return append(b, '}')
}
