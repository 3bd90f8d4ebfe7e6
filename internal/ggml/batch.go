package ggml

// Batch is where the decode probe finds llama_decode's batch and its arrays. llama_batch
// is passed by value, in memory above the return address; its first seven fields have
// kept their places from b3889 (October 2024) to today: only the fields after logits
// (all_pos_0, all_pos_1, all_seq_id) came and went.
type Batch struct {
	Stack  int // n_tokens, from the stack pointer at the probe
	Token  int // llama_token *token: NULL where the batch carries embeddings
	Pos    int // llama_pos *pos
	NSeqID int // int32_t *n_seq_id
	SeqID  int // llama_seq_id **seq_id
	Logits int // int8_t *logits: which tokens ask for an output
}

// LlamaBatch is llama_batch on x86-64.
var LlamaBatch = Batch{Stack: 8, Token: 8, Pos: 24, NSeqID: 32, SeqID: 40, Logits: 48}
