package synth

import "unicode/utf8"

// Fixed token costs added by the estimators for what surrounds text in a prompt.
const (
	// MessageOverheadTokens covers a message's evidence id, time, sender and flags as
	// rendered in a prompt.
	MessageOverheadTokens = 24
	// EntryOverheadTokens covers an existing entry's kind and time.
	EntryOverheadTokens = 12
)

// EstimateTokens is a conservative estimate of the tokens s costs a model, without a
// tokenizer:
//
//   - every non-ASCII rune of the Basic Multilingual Plane counts one token: a CJK rune
//     (Han, kana, Hangul, full-width punctuation) costs BPE tokenizers about one token,
//     common Han characters often less, and so do accented letters and Cyrillic;
//   - every rune outside it (emoji, rare Han extensions) counts two;
//   - ASCII counts one token per four bytes, rounded up (the usual ≈4 characters per
//     token of English text and code).
//
// It never returns less than the number of CJK runes, so a Chinese chat cannot
// overrun a budget the way a len/4 estimate would let it.
func EstimateTokens(s string) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		other++
		if size == 4 { // outside the BMP
			other++
		}
		i += size
	}
	return other + (ascii+3)/4
}

// EstimateMessageTokens estimates what a message costs in a prompt: its text, its
// sender name and [MessageOverheadTokens].
func EstimateMessageTokens(m Message) int {
	return EstimateTokens(m.Text) + EstimateTokens(m.SenderName) + MessageOverheadTokens
}

// EstimateEntryTokens estimates what an existing entry given as context costs.
func EstimateEntryTokens(e ExistingEntry) int {
	return EstimateTokens(e.Title) + EntryOverheadTokens
}
