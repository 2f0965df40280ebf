-- Who took the tree's epoch: a token the taking instance minted at boot. An
-- instance whose epoch write was reported failed although it was durable (a
-- late IOERR) finds its own token here and keeps that epoch, instead of
-- taking itself for superseded.
ALTER TABLE tree ADD COLUMN epoch_owner TEXT;
