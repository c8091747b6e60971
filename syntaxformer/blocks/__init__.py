"""Network blocks below the priors and the models: layers that know no prior and no model
(the ON-LSTM recurrence and its stack, :mod:`syntaxformer.blocks.on_lstm`; the sentence-vector
poolings, :mod:`syntaxformer.blocks.pooling`; the sentence-pair classification head,
:mod:`syntaxformer.blocks.pair_head`; the masked-LM output and loss, :mod:`syntaxformer.blocks.mlm_head`;
dropout with the package's cheap CPU mask, :mod:`syntaxformer.blocks.dropout`). Their fast paths (the
ON-LSTM's recurrent-weight gradient once, the mask generator) are in :mod:`syntaxformer.kernels`."""
