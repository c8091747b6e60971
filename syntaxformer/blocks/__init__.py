"""Network blocks below the priors and the models: layers that know no prior and no model
(the ON-LSTM recurrence and its stack, :mod:`syntaxformer.blocks.on_lstm`; the sentence-vector
poolings, :mod:`syntaxformer.blocks.pooling`; the sentence-pair classification head,
:mod:`syntaxformer.blocks.pair_head`; the masked-LM output and loss, :mod:`syntaxformer.blocks.mlm_head`;
dropout with a cheap CPU mask, :mod:`syntaxformer.blocks.dropout`)."""
