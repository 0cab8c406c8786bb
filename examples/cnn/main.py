"""A CNN classifier on MNIST-shaped data, written as PyTorch's MNIST example
is, with only the names changed to gt's (torch -> gt): Conv2d, max-pool,
dropout, log-softmax + NLL loss, Adadelta with StepLR, and a test loop
counting argmax(dim=1, keepdim=True) hits with eq(...).sum().item().

The data are synthetic (no download): 28x28 images, each class a fixed
random stroke pattern plus noise, normalized as MNIST's (mean 0.1307, std
0.3081), so the network learns them in an epoch.

    python3 examples/cnn/main.py --epochs 2 --train-size 2048
"""

import argparse
import time

import numpy as np

import gt
import gt.nn as nn
import gt.nn.functional as F
import gt.optim as optim
from gt.optim.lr_scheduler import StepLR


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = gt.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


class SyntheticMNIST:
    """(image [1, 28, 28] float32, label) pairs: a class's pattern plus noise, MNIST-normalized."""

    def __init__(self, size, seed):
        patterns = np.random.default_rng(1234).random((10, 28, 28)) < 0.15  # the same classes in every split
        rng = np.random.default_rng(seed)
        self.targets = rng.integers(0, 10, size)
        images = patterns[self.targets] * 0.8 + rng.random((size, 28, 28)) * 0.3
        self.data = ((images - 0.1307) / 0.3081).astype(np.float32)[:, None]

    def __len__(self):
        return len(self.targets)


class DataLoader:
    """Batches of a dataset as gt tensors (data [B, 1, 28, 28], target [B] int64), shuffled when asked."""

    def __init__(self, dataset, batch_size, shuffle=False, seed=0):
        self.dataset, self.batch_size, self.shuffle = dataset, batch_size, shuffle
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return (len(self.dataset) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        order = self.rng.permutation(len(self.dataset)) if self.shuffle else np.arange(len(self.dataset))
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            yield gt.tensor(self.dataset.data[rows]), gt.tensor(self.dataset.targets[rows])


def train(args, model, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))
            if args.dry_run:
                break


def test(model, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with gt.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)

    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))
    return test_loss, correct


def main():
    parser = argparse.ArgumentParser(description='gt MNIST-shaped Example')
    parser.add_argument('--batch-size', type=int, default=64, metavar='N',
                        help='input batch size for training (default: 64)')
    parser.add_argument('--test-batch-size', type=int, default=1000, metavar='N',
                        help='input batch size for testing (default: 1000)')
    parser.add_argument('--epochs', type=int, default=2, metavar='N',
                        help='number of epochs to train (default: 2)')
    parser.add_argument('--lr', type=float, default=1.0, metavar='LR',
                        help='learning rate (default: 1.0)')
    parser.add_argument('--gamma', type=float, default=0.7, metavar='M',
                        help='Learning rate step gamma (default: 0.7)')
    parser.add_argument('--dry-run', action='store_true', default=False,
                        help='quickly check a single pass')
    parser.add_argument('--seed', type=int, default=1, metavar='S',
                        help='random seed (default: 1)')
    parser.add_argument('--log-interval', type=int, default=10, metavar='N',
                        help='how many batches to wait before logging training status')
    parser.add_argument('--train-size', type=int, default=2048, help='synthetic training images (default: 2048)')
    parser.add_argument('--test-size', type=int, default=1000, help='synthetic test images (default: 1000)')
    args = parser.parse_args()

    gt.manual_seed(args.seed)

    train_loader = DataLoader(SyntheticMNIST(args.train_size, seed=args.seed), args.batch_size, shuffle=True,
                              seed=args.seed)
    test_loader = DataLoader(SyntheticMNIST(args.test_size, seed=args.seed + 1), args.test_batch_size)

    model = Net()
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        train(args, model, train_loader, optimizer, epoch)
        test(model, test_loader)
        scheduler.step()
    print(f"done in {time.perf_counter() - start:.1f} s")


if __name__ == '__main__':
    main()
