// The conformance cases of views and writes: unsqueeze, squeeze, permute,
// slice, select, cat, split, chunk; in-place copy_ / fill_ / zero_ / -=; a
// chain of results feeding results; mse_loss and its gradients; maximum /
// minimum; and, last, the cases after a redistribute (a session that places
// tensors).
// Included by conformance_test.cc inside its anonymous namespace, after the
// helpers (Normal, Ints, Case, AllDims, ...) these cases use; Cases() calls it.
#pragma once

// Adds the cases through `add` (conformance_test.cc's Cases()).
template <typename Add>
void AddViewInPlaceAndLossCases(Add& add) {
  using V = std::vector<gt::Tensor>;
  using A = std::vector<at::Tensor>;
  // Inputs other case tables use too, with the same seeds and values.
  const A x = {Normal({3, 4}, 20)};
  const A block = {Normal({2, 3, 4}, 70)};
  const at::Tensor classes = at::tensor({3, -100, 0, 4, 4, 1}, at::kLong);

  // -- more movement: unsqueeze, squeeze, permute, slice, select, cat, split, chunk
  add("unsqueeze_front", {Op::kUnsqueeze}, block, [](const V& v) { return v[0].unsqueeze(0); },
      [](const A& a) { return at::unsqueeze(a[0], 0); });
  add("unsqueeze_negative", {Op::kUnsqueeze}, block, [](const V& v) { return v[0].unsqueeze(-1); },
      [](const A& a) { return at::unsqueeze(a[0], -1); });
  add("squeeze_all", {Op::kSqueeze}, {Normal({1, 3, 1, 2}, 103)}, [](const V& v) { return v[0].squeeze(); },
      [](const A& a) { return at::squeeze(a[0]); });
  add("squeeze_dim", {Op::kSqueeze}, {Normal({1, 3, 1, 2}, 104)}, [](const V& v) { return v[0].squeeze(2); },
      [](const A& a) { return at::squeeze(a[0], 2); });
  add("squeeze_dim_not_one", {Op::kSqueeze}, {Normal({2, 3}, 105)}, [](const V& v) { return v[0].squeeze(0); },
      [](const A& a) { return at::squeeze(a[0], 0); });
  add("permute", {Op::kPermute}, block, [](const V& v) { return v[0].permute({2, 0, 1}); },
      [](const A& a) { return a[0].permute({2, 0, 1}); });
  add("slice_step", {Op::kSlice}, {Normal({10, 3}, 106)}, [](const V& v) { return v[0].slice(0, 1, 9, 3); },
      [](const A& a) { return at::slice(a[0], 0, 1, 9, 3); });
  add("slice_negative_open", {Op::kSlice}, {Normal({4, 7}, 107)},
      [](const V& v) { return v[0].slice(-1, -3, std::nullopt); }, [](const A& a) { return at::slice(a[0], 1, 4, 7); });
  add("slice_clamped_empty", {Op::kSlice}, {Normal({4, 7}, 108)}, [](const V& v) { return v[0].slice(0, 5, 100); },
      [](const A& a) { return at::slice(a[0], 0, 4, 4); });
  add("select", {Op::kSelect}, block, [](const V& v) { return v[0].select(1, -1); },
      [](const A& a) { return at::select(a[0], 1, 2); });
  add("cat_dim1", {Op::kCat}, {Normal({2, 3}, 109), Normal({2, 1}, 110), Normal({2, 2}, 111)},
      [](const V& v) { return gt::cat({v[0], v[1], v[2]}, 1); },
      [](const A& a) { return at::cat({a[0], a[1], a[2]}, 1); });
  add("cat_promotes", {Op::kCat}, {Ints({2}, at::kInt), Normal({3}, 112)},
      [](const V& v) { return gt::cat({v[0], v[1]}); }, [](const A& a) { return at::cat({a[0], a[1]}); });
  add("split_last_piece", {Op::kSlice}, {Normal({7, 2}, 113)}, [](const V& v) { return v[0].split(3)[2]; },
      [](const A& a) { return a[0].split(3)[2]; });
  add("chunk_middle", {Op::kSlice}, {Normal({2, 10}, 114)}, [](const V& v) { return v[0].chunk(3, 1)[1]; },
      [](const A& a) { return a[0].chunk(3, 1)[1]; });

  // -- in place: copy_ (broadcast + cast), fill_, zero_, -=
  add("copy_broadcast", {Op::kClone}, {Normal({3, 4}, 115), Normal({4}, 116)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c.copy_(v[1]); return c; },
      [](const A& a) { return a[1].expand({3, 4}).clone(); });
  add("fill_and_zero", {Op::kClone}, {Normal({2, 2}, 117), Normal({3}, 118)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c.fill_(7); gt::Tensor d = v[1].clone(); d.zero_(); return gt::cat({c.reshape({-1}), d}); },
      [](const A&) { return at::cat({at::full({4}, 7.0), at::zeros({3})}); });
  // mul_ by a tensor of the same dtype is one mul_into; of another, a mul and a copy_
  add("mul_in_place_broadcast", {Op::kClone}, {Normal({3, 4}, 121), Normal({4}, 122)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c.mul_(v[1]); gt::Tensor view = c.select(0, 1); view *= v[1]; return c; },
      [](const A& a) { at::Tensor c = a[0] * a[1]; c.select(0, 1).mul_(a[1]); return c; });
  // Another integer dtype: the product cast back, as ATen's in-place op does
  // (a float factor is refused, as there: tests/python/test_tensor_in_place.py).
  add("mul_in_place_int64_by_int32", {Op::kClone, Op::kMul}, {Ints({2, 3}, at::kLong), Ints({3}, at::kInt, 2)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c.mul_(v[1]); return c; },
      [](const A& a) { at::Tensor c = a[0].clone(); c.mul_(a[1]); return c; });
  // clip_grad_norm_'s norm: one sum_of_squares of every gradient (2 p)
  add("clip_grad_norm_sum_of_squares", {Op::kSumOfSquares}, {Normal({3, 4}, 124), Normal({5}, 125)},
      [](const V& v) {
        gt::Tensor p = v[0].clone().requires_grad_(), q = v[1].clone().requires_grad_();
        ((p * p).sum() + (q * q).sum()).backward();
        return gt::nn::clip_grad_norm_({p, q}, 1e9);
      },
      [](const A& a) { return at::cat({a[0].reshape({-1}), a[1]}).mul(2).norm(); });
  // float64, and a gradient long enough for the worker's vector lanes
  add("clip_grad_norm_sum_of_squares_float64", {Op::kSumOfSquares},
      {Normal({40, 33}, 135, at::kDouble), Normal({3}, 136, at::kDouble)},
      [](const V& v) {
        gt::Tensor p = v[0].clone().requires_grad_(), q = v[1].clone().requires_grad_();
        ((p * p).sum() + (q * q).sum()).backward();
        return gt::nn::clip_grad_norm_({p, q}, 1e9);
      },
      [](const A& a) { return at::cat({a[0].reshape({-1}), a[1]}).mul(2).norm(); });
  // add_ / sub_ / += / -= by a tensor of the same dtype is one add_into
  // (alpha scales the addend, broadcast); of another, an add and a copy_
  add("sub_in_place", {Op::kMul}, {Normal({3, 4}, 119), Normal({3, 4}, 120)},
      [](const V& v) { gt::Tensor p = v[0].clone(); p -= v[1] * 0.1; return p; },
      [](const A& a) { return a[0] - a[1] * 0.1; });
  add("add_in_place_alpha_broadcast", {Op::kClone}, {Normal({3, 4}, 126), Normal({4}, 127)},
      [](const V& v) {
        gt::Tensor c = v[0].clone();
        c.add_(v[1], 0.5);
        c += v[1];
        gt::Tensor row = c.select(0, 2);
        row.sub_(v[1], 2.0);
        return c;
      },
      [](const A& a) {
        at::Tensor c = a[0].clone();
        c.add_(a[1], 0.5).add_(a[1]);
        c.select(0, 2).sub_(a[1], 2.0);
        return c;
      });
  add("add_in_place_int64_by_int32", {Op::kClone, Op::kAdd}, {Ints({2, 3}, at::kLong), Ints({3}, at::kInt, 5)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c += v[1]; return c; },
      [](const A& a) { at::Tensor c = a[0].clone(); c += a[1]; return c; });
  add("add_in_place_float32_by_float64", {Op::kClone, Op::kAdd}, {Normal({2, 3}, 128), Normal({3}, 129).to(at::kDouble)},
      [](const V& v) { gt::Tensor c = v[0].clone(); c += v[1]; return c; },
      [](const A& a) { at::Tensor c = a[0].clone(); c += a[1]; return c; });

  // -- a chain, so that results feed results on the worker
  add("chain_mlp_layer", {Op::kMatmul, Op::kAdd, Op::kRelu, Op::kSum, Op::kMean},
      {Normal({4, 3}, 90), Normal({3, 5}, 91), Normal({5}, 92)},
      [](const V& v) { return (v[0].matmul(v[1]) + v[2]).relu().sum({1}).mean(); },
      [](const A& a) { return at::mean(at::sum(at::relu(at::matmul(a[0], a[1]) + a[2]), at::IntArrayRef{1})); });

  // -- mse_loss, and its gradients of the input and of the target
  add("mse_loss", {Op::kMseLoss}, {Normal({4, 6}, 135), Normal({4, 6}, 136)},
      [](const V& v) { return gt::nn::mse_loss(v[0], v[1]); }, [](const A& a) { return at::mse_loss(a[0], a[1]); });
  add("mse_loss_backward", {Op::kMseLossBackward}, {Normal({4, 6}, 137, at::kDouble), Normal({4, 6}, 138, at::kDouble)},
      [](const V& v) {
        gt::Tensor x = v[0].clone().requires_grad_(), t = v[1].clone().requires_grad_();
        (gt::nn::mse_loss(x, t) * 0.3).backward();
        return gt::cat({x.grad().reshape({-1}), t.grad().reshape({-1})});
      },
      [](const A& a) {
        at::Tensor x = a[0].clone().requires_grad_(), t = a[1].clone().requires_grad_();
        (at::mse_loss(x, t) * 0.3).backward();
        return at::cat({x.grad().reshape({-1}), t.grad().reshape({-1})});
      });

  // -- maximum / minimum: broadcasting, promotion, ties (Ints repeat), and the
  // gradient, which goes to the larger (smaller) operand, half each on a tie
  add("maximum_broadcast", {Op::kMaximum}, {Normal({3, 4}, 139), Normal({4}, 140)},
      [](const V& v) { return gt::maximum(v[0], v[1]); }, [](const A& a) { return at::maximum(a[0], a[1]); });
  add("minimum_method_broadcast", {Op::kMinimum}, {Normal({2, 1, 4}, 141), Normal({3, 1}, 142)},
      [](const V& v) { return v[0].min(v[1]); }, [](const A& a) { return at::minimum(a[0], a[1]); });
  add("maximum_int32_and_float64_promote", {Op::kMaximum}, {Ints({3, 4}, at::kInt), Normal({3, 4}, 143, at::kDouble)},
      [](const V& v) { return v[0].max(v[1]); }, [](const A& a) { return at::maximum(a[0], a[1]); });
  add("minimum_int64", {Op::kMinimum}, {Ints({3, 4}, at::kLong), Ints({4}, at::kLong, 5)},
      [](const V& v) { return v[0].minimum(v[1]); }, [](const A& a) { return at::minimum(a[0], a[1]); });
  for (const bool maximum : {true, false}) {
    const Op op = maximum ? Op::kMaximum : Op::kMinimum;
    add(maximum ? "maximum_grad_ties" : "minimum_grad_ties", {op},
        {Ints({3, 4}, at::kDouble), Ints({4}, at::kDouble, 4)},  // row 1 ties
        [maximum](const V& v) {
          gt::Tensor x = v[0].clone().requires_grad_(), y = v[1].clone().requires_grad_();
          ((maximum ? gt::maximum(x, y) : gt::minimum(x, y)) * 3.0).sum().backward();
          return gt::cat({x.grad().reshape({-1}), y.grad().reshape({-1})});
        },
        [maximum](const A& a) {
          at::Tensor x = a[0].clone().requires_grad_(), y = a[1].clone().requires_grad_();
          ((maximum ? at::maximum(x, y) : at::minimum(x, y)) * 3.0).sum().backward();
          return at::cat({x.grad().reshape({-1}), y.grad().reshape({-1})});
        });
  }

  // -- last: a redistribute makes the session one that places tensors, and
  // from then on cross_entropy, mse_loss and sum_of_squares give way to
  // their composites (masks, log_softmax, gather; differences, squares, sums)
  add("redistribute", {Op::kRedistribute}, x,  // a copy (one worker: the layout is whole)
      [](const V& v) {
        return gt::distributed::redistribute(v[0], gt::distributed::DeviceMesh({0}), {gt::distributed::Replicate()});
      },
      [](const A& a) { return a[0].clone(); });
  add("cross_entropy_composite_once_placing", {Op::kLogSoftmax, Op::kGather}, {Normal({6, 5}, 134), classes},
      [](const V& v) { return gt::nn::cross_entropy(v[0], v[1]); },
      [](const A& a) { return at::cross_entropy_loss(a[0], a[1]); });
  add("mse_loss_composite_once_placing", {Op::kSub, Op::kMean}, {Normal({4, 6}, 139), Normal({4, 6}, 140)},
      [](const V& v) { return gt::nn::mse_loss(v[0], v[1]); }, [](const A& a) { return at::mse_loss(a[0], a[1]); });
}
