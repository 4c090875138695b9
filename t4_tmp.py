import sys, copy, torch, pt2rt
class M(torch.nn.Module):
    def __init__(s, bf=True, layers=1, bi=False, stack=False):
        super().__init__(); torch.manual_seed(0)
        s.lstm = torch.nn.LSTM(8, 16, num_layers=layers, bidirectional=bi, batch_first=bf)
        D = 2 if bi else 1
        s.lstm2 = torch.nn.LSTM(16*D, 16, batch_first=bf) if stack else None
        s.head = torch.nn.Linear(16*(1 if stack else D), 3)
    def forward(s, x):
        o, (h, c) = s.lstm(x)
        if s.lstm2 is not None: o, _ = s.lstm2(o)
        return s.head(o), h
B = pt2rt.Dim("batch", min=1, max=8); T = pt2rt.Dim("seq", min=2, max=12)
for bf, layers, bi, stack in [(True,1,False,False),(False,2,True,False),(True,2,False,True)]:
    m = M(bf, layers, bi, stack)
    x = torch.randn(2, 6, 8) if bf else torch.randn(6,2,8)
    ds = ({0: B, 1: T},) if bf else ({0: T, 1: B},)
    a = pt2rt.export(m, (x,), dynamic_shapes=ds, bundle_examples=False)
    a.save("/tmp/a_lstm6.pt2"); a = pt2rt.load("/tmp/a_lstm6.pt2")
    ops = sorted({o.qualified() for o in a.program.operators})
    print([o for o in ops if "lstm" in o or "cell" in o])
    for shape in [(1,2,8),(3,7,8),(8,12,8)]:
        if not bf: shape = (shape[1], shape[0], 8)
        x = torch.randn(*shape)
        mm = copy.deepcopy(m).train()
        outs = mm(x); gs = [torch.randn_like(o) for o in outs]
        torch.autograd.backward(outs, gs)
        st = a.train_step(x, grad_outputs=gs)
        e = max((st.outputs[i]-outs[i]).abs().max().item() for i in range(2))
        ge = max((st.grads[n]-p.grad).abs().max().item() for n, p in mm.named_parameters())
        assert sorted(st.grads) == sorted(n for n,_ in mm.named_parameters())
        print(bf, layers, bi, stack, shape, e, ge)
